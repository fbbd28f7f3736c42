"""The dead-letter stream read back: the newest entries, without scanning every run."""

from __future__ import annotations

from jetcron.bus.ports import Streams
from jetcron.wire import subjects as s
from jetcron.wire.codec import decode
from jetcron.wire.messages import DeadLettered


async def dead_lettered(streams: Streams, limit: int) -> list[DeadLettered]:
    """Up to `limit` of the newest entries of JC_DLQ, oldest first."""
    return [decode(data, DeadLettered) for data in await streams.newest(s.STREAM_DLQ, s.DLQ_ALL, limit)]

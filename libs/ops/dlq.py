"""The dead-letter stream read back: the newest entries, without scanning every run."""

from __future__ import annotations

from jetcron.bus.ports import JetStream
from jetcron.bus.streams import newest
from jetcron.wire import subjects as s
from jetcron.wire.codec import decode
from jetcron.wire.messages import DeadLettered


async def dead_lettered(js: JetStream, limit: int, *, idle: float = 0.5) -> list[DeadLettered]:
    """Up to `limit` of the newest entries of JC_DLQ, oldest first."""
    return [decode(data, DeadLettered) for data in await newest(js, s.STREAM_DLQ, s.DLQ_ALL, limit, idle=idle)]

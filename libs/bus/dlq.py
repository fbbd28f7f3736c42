"""The dead-letter stream read back: the newest entries, without scanning every run."""

from __future__ import annotations

import nats.errors
from nats.js import JetStreamContext
from nats.js.api import ConsumerConfig, DeliverPolicy

from jetcron.bus.kv import drop_subscription, translate
from jetcron.wire import subjects as s
from jetcron.wire.codec import decode
from jetcron.wire.messages import DeadLettered


async def dead_lettered(js: JetStreamContext, limit: int, *, idle: float = 0.5) -> list[DeadLettered]:
    """Up to `limit` of the newest entries of JC_DLQ, oldest first."""
    try:
        state = (await js.stream_info(s.STREAM_DLQ)).state
    except Exception as exc:
        raise translate(exc, "read the dead-letter stream") from exc
    if not state.messages:
        return []
    start = max(state.first_seq, state.last_seq - limit + 1)
    config = ConsumerConfig(deliver_policy=DeliverPolicy.BY_START_SEQUENCE, opt_start_seq=start)
    sub = await js.subscribe(s.DLQ_ALL, ordered_consumer=True, config=config, inactive_threshold=30)
    entries: list[DeadLettered] = []
    try:
        while True:
            try:
                msg = await sub.next_msg(timeout=idle)
            except (TimeoutError, nats.errors.TimeoutError):
                break
            entries.append(decode(msg.data, DeadLettered))
            if msg.metadata.num_pending == 0:
                break
    finally:
        await drop_subscription(js, sub)
    return entries[-limit:]

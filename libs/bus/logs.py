"""Run output in the logs stream: write chunks, read them back, follow them live."""

from __future__ import annotations

from collections.abc import AsyncIterator

import nats.errors
from nats.js import JetStreamContext
from nats.js.api import DeliverPolicy

from jetcron.wire import subjects as s


async def read_chunks(js: JetStreamContext, run_id: str, *, follow: bool = False,
                      idle: float = 0.5) -> AsyncIterator[tuple[str, bytes, bool]]:
    """(stream name, data, is_end) for each chunk; without follow, stop when caught up."""
    sub = await js.subscribe(s.logs_subject(run_id), ordered_consumer=True, deliver_policy=DeliverPolicy.ALL,
                             inactive_threshold=30)
    try:
        while True:
            try:
                msg = await sub.next_msg(timeout=idle)
            except (TimeoutError, nats.errors.TimeoutError):
                if follow:
                    continue
                return
            headers = msg.headers or {}
            end = headers.get(s.HDR_LOG_END) == "1"
            yield headers.get(s.HDR_LOG_STREAM, "stdout"), msg.data, end
            if end:
                return
            if not follow and msg.metadata.num_pending == 0:
                return
    finally:
        await sub.unsubscribe()

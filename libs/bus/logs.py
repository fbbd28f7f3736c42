"""Run output in the logs stream: write chunks, read them back, follow them live."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable

import nats.errors
from nats.js import JetStreamContext
from nats.js.api import DeliverPolicy

from jetcron.bus.kv import drop_subscription
from jetcron.wire import subjects as s


async def read_chunks(js: JetStreamContext, run_id: str, *, follow: bool = False, idle: float = 0.5,
                      until: Callable[[], Awaitable[bool]] | None = None) -> AsyncIterator[tuple[str, bytes, bool]]:
    """(stream name, data, is_end) for each chunk; without follow, stop when caught up.

    With follow and `until` (e.g. "the run is terminal"), stop once caught up after `until()` says so, not at
    an end marker: an attempt without output writes none, a killed one cannot, and a retry writes more after it.
    """
    sub = await js.subscribe(s.logs_filter(run_id), ordered_consumer=True, deliver_policy=DeliverPolicy.ALL,
                             inactive_threshold=30)
    ending = False
    try:
        while True:
            try:
                msg = await sub.next_msg(timeout=idle)
            except (TimeoutError, nats.errors.TimeoutError):
                if not follow or ending:
                    return
                # Output is stored before the finish is reported: one more quiet period drains what is left.
                ending = until is not None and await until()
                continue
            headers = msg.headers or {}
            end = headers.get(s.HDR_LOG_END) == "1"
            yield headers.get(s.HDR_LOG_STREAM, "stdout"), msg.data, end
            if end and until is None:
                return
            if not follow and msg.metadata.num_pending == 0:
                return
    finally:
        await drop_subscription(js, sub)

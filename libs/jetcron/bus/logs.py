"""Run output in the logs stream read back: what is stored, or followed live."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable

from jetcron.bus.ports import Streams
from jetcron.wire import subjects as s


async def read_chunks(streams: Streams, run_id: str, *, follow: bool = False, idle: float = 0.5, after: int = 0,
                      until: Callable[[], Awaitable[bool]] | None = None
                      ) -> AsyncIterator[tuple[str, bytes, bool, int]]:
    """(stream name, data, is_end, stream sequence) for each chunk after sequence `after` (0: from the first);
    without follow, stop when caught up.

    With follow and `until` (e.g. "the run is terminal"), stop once caught up after `until()` says so, not at
    an end marker: an attempt without output writes none, a killed one cannot, and a retry writes more after it.
    """
    ending = False
    reader = streams.read(s.logs_filter(run_id), idle=idle, after=after)
    try:
        async for read in reader:
            if read is None:
                if not follow or ending:
                    return
                # Output is stored before the finish is reported: one more quiet period drains what is left.
                ending = until is not None and await until()
                continue
            msg, more = read
            headers = msg.headers or {}
            end = headers.get(s.HDR_LOG_END) == "1"
            yield headers.get(s.HDR_LOG_STREAM, "stdout"), msg.data, end, int(msg.metadata.sequence.stream)
            if end and until is None:
                return
            if not follow and more == 0:
                return
    finally:
        await reader.aclose()

"""How full the idempotency bucket is, for jobs' once(): a run's credential may not read the bucket's stream info
(it lists every tenant's keys), so the api answers jc.room.<tenant> with the counts alone.

The answer comes from the api's last reading while it is young, so that a once() costs its job one request and
the api none: read on every question, the api's own round trip to the stream leader would add to the job's,
and on a slow link (each hop seconds long) the job's question would outlast its timeout and fail a job that did
nothing wrong. A reading up to `STALE` seconds old is answered at once while a fresh one is taken behind it; the
fill it misses is what claims add in those seconds, which the bucket's reserve (1 % of it, IdempotencyKeys.
ensure_room) is there to absorb, as it absorbs claims racing each other."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from jetcron.bus.ports import Message, Streams
from jetcron.core.errors import JetcronError
from jetcron.wire import subjects as s
from jetcron.wire.codec import encode
from jetcron.wire.messages import IdempotencyRoom
from jetcron_services.api.ports import ServeRoomPorts

FRESH = 1.0
"""Seconds a reading is answered without another being taken."""
STALE = 5.0
"""Seconds a reading may still be answered, while a fresh one is taken; older, the question waits for one."""


async def room(streams: Streams) -> IdempotencyRoom:
    """The idempotency bucket's fill and the longest TTL it keeps, or why they could not be read."""
    try:
        state = await streams.state(s.kv_stream(s.BUCKET_IDEMPOTENCY))
    except JetcronError as exc:
        return IdempotencyRoom(error=str(exc))
    return IdempotencyRoom(bytes=state.bytes, max_bytes=state.max_bytes, max_age=state.max_age)


class RoomGauge:
    """room(), read at most once per `FRESH` seconds however many jobs ask; one reading at a time."""

    def __init__(self, streams: Streams, monotonic: Callable[[], float] = time.monotonic) -> None:
        self.streams = streams
        self.monotonic = monotonic
        self.last: IdempotencyRoom | None = None
        self.read_at = 0.0
        self.reading: asyncio.Task[IdempotencyRoom] | None = None

    async def answer(self) -> IdempotencyRoom:
        age = self.monotonic() - self.read_at
        if self.last is not None and not self.last.error and age < STALE:
            if age >= FRESH:
                self._read()
            return self.last
        return await asyncio.shield(self._read())

    def _read(self) -> asyncio.Task[IdempotencyRoom]:
        if self.reading is None:
            self.reading = asyncio.create_task(self._take())
        return self.reading

    async def _take(self) -> IdempotencyRoom:
        asked = self.monotonic()
        try:
            found = await room(self.streams)
        finally:
            self.reading = None
        # A failed reading is answered to the questions that waited for it, never kept for later ones.
        self.last, self.read_at = found, asked
        return found


async def serve_room(ctx: ServeRoomPorts) -> object:
    """Answer jc.room.* in the api's queue group."""
    gauge = RoomGauge(ctx.streams)

    async def handle(msg: Message) -> None:
        await msg.respond(encode(await gauge.answer()))

    return await ctx.rpc.serve(s.IDEM_ROOM_ALL, handle, queue=s.API_QUEUE)

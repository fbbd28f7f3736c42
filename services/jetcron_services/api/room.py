"""How full the idempotency bucket is, for jobs' once(): a run's credential may not read the bucket's stream info
(it lists every tenant's keys), so the api answers jc.room.<tenant> with the counts alone."""

from __future__ import annotations

from jetcron.bus.ports import Message, Streams
from jetcron.core.errors import JetcronError
from jetcron.wire import subjects as s
from jetcron.wire.codec import encode
from jetcron.wire.messages import IdempotencyRoom
from jetcron_services.runtime import Context


async def room(streams: Streams) -> IdempotencyRoom:
    """The idempotency bucket's fill and the longest TTL it keeps, or why they could not be read."""
    try:
        state = await streams.state(s.kv_stream(s.BUCKET_IDEMPOTENCY))
    except JetcronError as exc:
        return IdempotencyRoom(error=str(exc))
    return IdempotencyRoom(bytes=state.bytes, max_bytes=state.max_bytes, max_age=state.max_age)


async def serve_room(ctx: Context) -> object:
    """Answer jc.room.* in the api's queue group."""

    async def handle(msg: Message) -> None:
        await msg.respond(encode(await room(ctx.streams)))

    return await ctx.rpc.serve(s.IDEM_ROOM_ALL, handle, queue=s.API_QUEUE)

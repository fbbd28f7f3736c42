"""What a stream or a durable consumer holds now, from the server's own counts: for services that size a queue
or judge whether a consumer is idle. Errors are jetcron's (NotFound for a consumer that does not exist)."""

from __future__ import annotations

import msgspec
import nats.js.errors as jse

from jetcron.bus.kv import translate
from jetcron.bus.ports import JetStream
from jetcron.core.errors import NotFound


class StreamState(msgspec.Struct, frozen=True):
    messages: int
    last_seq: int
    max_msgs: int
    """The stream's message limit; 0 when it has none."""


class ConsumerState(msgspec.Struct, frozen=True):
    pending: int
    """Messages not delivered yet."""
    ack_pending: int
    """Delivered, neither acked nor terminated."""
    ack_floor: int
    """The stream sequence up to which every message is acked."""


async def stream_state(js: JetStream, stream: str) -> StreamState:
    try:
        info = await js.stream_info(stream)
    except Exception as exc:
        raise translate(exc, f"state of stream {stream}") from exc
    return StreamState(messages=int(info.state.messages), last_seq=int(info.state.last_seq or 0),
                       max_msgs=max(int(info.config.max_msgs or 0), 0))


async def consumer_state(js: JetStream, stream: str, consumer: str) -> ConsumerState:
    try:
        info = await js.consumer_info(stream, consumer)
    except jse.NotFoundError:
        raise NotFound("consumer", f"{stream}/{consumer}") from None
    except Exception as exc:
        raise translate(exc, f"state of consumer {stream}/{consumer}") from exc
    floor = int(info.ack_floor.stream_seq or 0) if info.ack_floor else 0
    return ConsumerState(pending=int(info.num_pending or 0), ack_pending=int(info.num_ack_pending or 0),
                         ack_floor=floor)

"""What a stream or a durable consumer holds now, from the server's own counts: for services that size a queue
or judge whether a consumer is idle; and a stream's newest messages, or those since a time, read without a
durable consumer. Errors are jetcron's (NotFound for a consumer that does not exist)."""

from __future__ import annotations

import contextlib
from datetime import datetime

import msgspec
import nats.errors
import nats.js.errors as jse
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

from jetcron.bus.kv import drop_subscription, translate
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


async def subject_counts(js: JetStream, stream: str, subjects: str) -> dict[str, int]:
    """Messages held per subject matching `subjects` (a filter with wildcards)."""
    try:
        info = await js.stream_info(stream, subjects_filter=subjects)
    except Exception as exc:
        raise translate(exc, f"subjects of stream {stream}") from exc
    return {subject: int(count) for subject, count in (info.state.subjects or {}).items()}


async def newest(js: JetStream, stream: str, subject: str, limit: int, *, idle: float = 0.5) -> list[bytes]:
    """The payloads of those of the stream's newest `limit` messages that are on `subject`, oldest first, read by an
    ephemeral ordered consumer from the sequence that many before the last."""
    state = await stream_state(js, stream)
    if not state.messages:
        return []
    start = max(1, state.last_seq - limit + 1)
    config = ConsumerConfig(deliver_policy=DeliverPolicy.BY_START_SEQUENCE, opt_start_seq=start)
    try:
        sub = await js.subscribe(subject, ordered_consumer=True, config=config, inactive_threshold=30)
    except Exception as exc:
        raise translate(exc, f"read stream {stream}") from exc
    payloads: list[bytes] = []
    try:
        while True:
            try:
                msg = await sub.next_msg(timeout=idle)
            except (TimeoutError, nats.errors.TimeoutError):
                break
            payloads.append(msg.data)
            if msg.metadata.num_pending == 0:
                break
    finally:
        await drop_subscription(js, sub)
    return payloads[-limit:]


async def written_since(js: JetStream, stream: str, subject: str, since: datetime,
                        cap: int) -> tuple[list[bytes], bool]:
    """The payloads of the messages on `subject` stored since `since`, at most `cap` of them (oldest first), and
    whether more were there. Read by an ephemeral pull consumer in memory, no acks."""
    config = ConsumerConfig(deliver_policy=DeliverPolicy.BY_START_TIME, opt_start_time=since,
                            ack_policy=AckPolicy.NONE, inactive_threshold=30.0, mem_storage=True)
    try:
        sub = await js.pull_subscribe(subject, stream=stream, config=config)
    except Exception as exc:
        raise translate(exc, f"read stream {stream}") from exc
    payloads: list[bytes] = []
    try:
        pending = (await sub.consumer_info()).num_pending or 0
        while len(payloads) < min(pending, cap):
            try:
                batch = await sub.fetch(min(256, min(pending, cap) - len(payloads)), timeout=3)
            except (TimeoutError, nats.errors.TimeoutError):
                break
            payloads.extend(msg.data for msg in batch)
        return payloads, pending > cap
    finally:
        with contextlib.suppress(Exception):
            await sub.unsubscribe()

"""What a stream or a durable consumer holds now, from the server's own counts: for services that size a queue
or judge whether a consumer is idle; and a stream's newest messages, or those since a time, read without a
durable consumer (ports.Streams on the server: ServerStreams). Errors are jetcron's (NotFound for a stream or a
consumer that does not exist)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from datetime import datetime
from typing import TypeVar

import msgspec
import nats.errors
import nats.js.errors as jse
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

from jetcron.bus.kv import drop_subscription, read_value, translate, value_of
from jetcron.bus.ordered import in_order
from jetcron.bus.ports import ConsumerState, JetStream, Request, Stored, StreamState
from jetcron.core.errors import NotFound
from jetcron.wire import subjects as s
from jetcron.wire.codec import decode

T = TypeVar("T", bound=msgspec.Struct)

OLDEST_BATCH = 256


async def stream_state(js: JetStream, stream: str) -> StreamState:
    try:
        info = await js.stream_info(stream)
    except jse.NotFoundError:
        raise NotFound("stream", stream) from None
    except Exception as exc:
        raise translate(exc, f"state of stream {stream}") from exc
    return StreamState(messages=int(info.state.messages or 0), bytes=int(info.state.bytes or 0),
                       first_seq=int(info.state.first_seq or 0), last_seq=int(info.state.last_seq or 0),
                       max_msgs=max(int(info.config.max_msgs or 0), 0),
                       max_bytes=max(int(info.config.max_bytes or 0), 0),
                       max_age=max(float(info.config.max_age or 0), 0.0))


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


class ServerStreams:
    """ports.Streams on JetStream."""

    def __init__(self, js: JetStream) -> None:
        self.js = js

    async def state(self, stream: str) -> StreamState:
        return await stream_state(self.js, stream)

    async def consumer(self, stream: str, durable: str) -> ConsumerState:
        return await consumer_state(self.js, stream, durable)

    async def counts(self, stream: str, subjects: str) -> dict[str, int]:
        return await subject_counts(self.js, stream, subjects)

    async def last(self, stream: str, subject: str) -> Stored | None:
        found = await read_value(self.js, stream, subject, f"{stream} {subject}")
        if found is None:
            return None
        data, msg = found
        return Stored(data=data, seq=int(msg.seq or 0), time=msg.time, headers=msg.headers)

    async def purge(self, stream: str, *, subject: str | None = None, below: int | None = None) -> None:
        if subject is None and below is None:
            raise ValueError(f"purge of {stream} names neither a subject nor a sequence: it would empty the stream")
        if subject is None and below is not None and below <= 1:
            return  # nothing is below the first sequence (and the server reads seq 0 as "all")
        try:
            await self.js.purge_stream(stream, subject=subject, seq=below)
        except Exception as exc:
            raise translate(exc, f"purge {stream}" + (f" {subject}" if subject else "")
                            + (f" below {below}" if below is not None else "")) from exc

    async def oldest(self, bucket: str, kind: type[T], after: int = 0) -> AsyncIterator[tuple[str, T, int, int]]:
        # Each stored message of a history=1 bucket is its key's only one, so stream order is write order.
        subject = s.kv_subject(bucket, ">")
        prefix = s.kv_subject(bucket, "")
        start = (dict(deliver_policy=DeliverPolicy.BY_START_SEQUENCE, opt_start_seq=after + 1) if after
                 else dict(deliver_policy=DeliverPolicy.ALL))
        config = ConsumerConfig(ack_policy=AckPolicy.NONE, inactive_threshold=60.0, filter_subject=subject,
                                **start)
        try:
            sub = await self.js.pull_subscribe(subject, stream=s.kv_stream(bucket), config=config)
        except Exception as exc:
            raise translate(exc, f"read {bucket} from its oldest") from exc
        try:
            while True:
                try:
                    msgs = await sub.fetch(OLDEST_BATCH, timeout=2)
                except (TimeoutError, nats.errors.TimeoutError):
                    return
                for msg in msgs:
                    if (data := value_of(msg.data, msg.headers)) is None:
                        continue
                    with contextlib.suppress(msgspec.DecodeError):
                        yield (msg.subject[len(prefix):], decode(data, kind), len(data) + len(msg.subject),
                               int(msg.metadata.sequence.stream))
                if msgs and msgs[-1].metadata.num_pending == 0:
                    return
        finally:
            await drop_subscription(self.js, sub)

    async def tail(self, subject: str) -> AsyncIterator[Request]:
        # An ordered consumer: no acks, no durable state, gone with the iterator.
        try:
            sub = await self.js.subscribe(subject, ordered_consumer=True, deliver_policy=DeliverPolicy.NEW)
        except Exception as exc:
            raise translate(exc, f"follow {subject}") from exc
        try:
            async for msg in in_order(sub):
                yield msg
        finally:
            await sub.unsubscribe()

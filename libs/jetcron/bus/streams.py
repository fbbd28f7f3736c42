"""What a stream or a durable consumer holds now, from the server's own counts: for services that size a queue
or judge whether a consumer is idle; and a stream's newest messages, or those since a time, read without a
durable consumer (ports.Streams on the server: ServerStreams). Errors are jetcron's (NotFound for a stream or a
consumer that does not exist)."""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import AsyncGenerator, AsyncIterator
from datetime import datetime
from typing import TypeVar

import msgspec
import nats.errors
import nats.js.errors as jse
from nats.aio.msg import Msg
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

from jetcron.bus.handles import JetStream
from jetcron.bus.kv import drop_subscription, read_value, stored_size, translate, value_of
from jetcron.bus.ordered import in_order
from jetcron.bus.ports import ConsumerState, Request, Stored, StreamState
from jetcron.core.errors import NotFound
from jetcron.wire import subjects as s
from jetcron.wire.codec import decode

T = TypeVar("T", bound=msgspec.Struct)

OLDEST_BATCH = 256
NEWEST_IDLE = 0.5
"""Seconds `newest` waits for a message it was promised before it returns what it has."""
WRITTEN_BATCH = 1024
WRITTEN_WAIT = 3.0
"""Seconds a pull of `written_since` waits before the read ends with what came."""
"""Seconds `newest` waits for a message it was promised before it returns what it has."""


async def stream_state(js: JetStream, stream: str) -> StreamState:
    try:
        info = await js.stream_info(stream)
    except jse.NotFoundError:
        raise NotFound("stream", stream) from None
    except Exception as exc:
        raise translate(exc, f"state of stream {stream}") from exc
    return StreamState(messages=int(info.state.messages or 0), bytes=int(info.state.bytes or 0),
                       first_seq=int(info.state.first_seq or 0), last_seq=int(info.state.last_seq or 0),
                       starts_at=int(info.config.first_seq or 0), max_msgs=max(int(info.config.max_msgs or 0), 0),
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
                        yield (msg.subject[len(prefix):], decode(data, kind),
                               stored_size(msg.subject, msg.data, msg.headers), int(msg.metadata.sequence.stream))
                if msgs and msgs[-1].metadata.num_pending == 0:
                    return
        finally:
            await drop_subscription(self.js, sub)

    async def read(self, subject: str, *, idle: float, after: int = 0) -> AsyncGenerator[tuple[Msg, int] | None, None]:
        # From a sequence, the server skips what came before: a reader resuming reads only what is new.
        config = (ConsumerConfig(deliver_policy=DeliverPolicy.BY_START_SEQUENCE, opt_start_seq=after + 1) if after
                  else ConsumerConfig(deliver_policy=DeliverPolicy.ALL))
        try:
            sub = await self.js.subscribe(subject, ordered_consumer=True, config=config, inactive_threshold=30)
        except Exception as exc:
            raise translate(exc, f"read {subject}") from exc
        try:
            while True:
                try:
                    msg = await sub.next_msg(timeout=idle)
                except (TimeoutError, nats.errors.TimeoutError):
                    yield None
                    continue
                yield msg, int(msg.metadata.num_pending or 0)
        finally:
            await drop_subscription(self.js, sub)

    async def newest(self, stream: str, subject: str, limit: int) -> list[bytes]:
        # An ephemeral ordered consumer from the sequence `limit` before the last: never a scan of the stream.
        state = await self.state(stream)
        if not state.messages:
            return []
        config = ConsumerConfig(deliver_policy=DeliverPolicy.BY_START_SEQUENCE,
                                opt_start_seq=max(1, state.last_seq - limit + 1))
        try:
            sub = await self.js.subscribe(subject, ordered_consumer=True, config=config, inactive_threshold=30)
        except Exception as exc:
            raise translate(exc, f"read stream {stream}") from exc
        payloads: list[bytes] = []
        try:
            while True:
                try:
                    msg = await sub.next_msg(timeout=NEWEST_IDLE)
                except (TimeoutError, nats.errors.TimeoutError):
                    break
                payloads.append(msg.data)
                if msg.metadata.num_pending == 0:
                    break
        finally:
            await drop_subscription(self.js, sub)
        return payloads[-limit:]

    async def written_since(self, stream: str, subject: str, since: datetime,
                            cap: int) -> tuple[list[Request], bool]:
        # An ephemeral consumer from a time (the server skips what is older), whose answer says how many it holds,
        # then pulls of them. It is left to lapse (inactive_threshold) rather than deleted: one more request the
        # reader would wait for. A pull that brings nothing within its wait ends the read with what came: what it
        # counted may have gone since (a bucket keeps one value per key), or a new consumer on a cluster may not
        # answer yet; `more` then says the read is short.
        name = f"since_{secrets.token_hex(6)}"
        config = ConsumerConfig(name=name, filter_subject=subject, deliver_policy=DeliverPolicy.BY_START_TIME,
                                opt_start_time=since, ack_policy=AckPolicy.NONE, inactive_threshold=30.0,
                                mem_storage=True)
        try:
            info = await self.js.add_consumer(stream, config)
            pending = int(info.num_pending or 0)
            if not pending:
                return [], False
            sub = await self.js.pull_subscribe_bind(name, stream=stream)
        except Exception as exc:
            raise translate(exc, f"read stream {stream}") from exc
        want = min(pending, cap)
        msgs: list[Request] = []
        try:
            while len(msgs) < want:
                try:
                    msgs.extend(await sub.fetch(min(WRITTEN_BATCH, want - len(msgs)), timeout=WRITTEN_WAIT))
                except (TimeoutError, nats.errors.TimeoutError):
                    break
        except Exception as exc:
            raise translate(exc, f"read stream {stream}") from exc
        finally:
            with contextlib.suppress(Exception):
                await sub.unsubscribe()
        return msgs, pending > len(msgs)

    async def tail(self, subject: str) -> AsyncGenerator[Request, None]:
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

"""What the contract tests share: the record type, and the two sides of a work queue."""

from __future__ import annotations

import itertools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

import msgspec
from nats.js.api import AckPolicy, ConsumerConfig, DiscardPolicy, StreamConfig

from jetcron.bus.consume import PullQueue
from jetcron.bus.lease import Leases
from jetcron.bus.memory import MemoryPublisher, MemoryQueue, MemoryStreams
from jetcron.bus.ports import Consumers, Message, Publisher, Streams, WorkQueue
from jetcron.bus.publish import StreamPublisher, publish
from jetcron.bus.streams import ServerStreams

ACK_WAIT = 1.0
Put = Callable[[bytes], Awaitable[int]]
"""Puts a message on a consumers' test stream; its sequence."""
names = itertools.count(1)
START = datetime.now(UTC)
"""Unique bucket and stream names within a run."""


class Item(msgspec.Struct, frozen=True):
    name: str
    count: int = 0


class Queue(WorkQueue, Protocol):
    """The work-queue port plus what a test needs to fill it."""

    subject: str
    """Messages go to `subject.<anything>`."""

    async def publish(self, subject: str, data: bytes, *, msg_id: str | None = None) -> int: ...


class ServerQueue:
    """A work-queue stream with one durable pull consumer, through bus.publish and consume.PullQueue."""

    def __init__(self, js: Any, subject: str, pull: PullQueue) -> None:
        self.js, self.subject, self.pull = js, subject, pull

    async def publish(self, subject: str, data: bytes, *, msg_id: str | None = None) -> int:
        return await publish(self.js, subject, data, msg_id=msg_id)

    async def fetch(self, batch: int, timeout: float) -> list[Message]:
        return await self.pull.fetch(batch, timeout)


class TwinQueue:
    def __init__(self) -> None:
        self.queue = MemoryQueue(ack_wait=ACK_WAIT)
        self.subject = "ct"

    async def publish(self, subject: str, data: bytes, *, msg_id: str | None = None) -> int:
        return await self.queue.publish(subject, data, msg_id=msg_id)

    async def fetch(self, batch: int, timeout: float) -> list[Message]:
        return list(await self.queue.fetch(batch, timeout))




@dataclass
class LeaseSide:
    leases: Leases
    lapse: Callable[[str], None] | None
    """Lets a key's lease lapse at once (the twin); None: the server's TTL must pass."""
    server: bool


class PublisherSide(Protocol):
    """The publisher port, and what a test reads back of what it stored."""

    publisher: Publisher
    subject: str
    """Messages go to `subject.<anything>`."""

    async def stored(self, seq: int) -> tuple[str, bytes, dict[str, str]]:
        """The subject, data and headers stored at `seq`."""
        ...

    async def count(self) -> int:
        """How many messages are stored."""
        ...


class ServerPublisher:
    def __init__(self, js: Any, stream: str, subject: str) -> None:
        self.js, self.stream, self.subject = js, stream, subject
        self.publisher: Publisher = StreamPublisher(js)

    async def stored(self, seq: int) -> tuple[str, bytes, dict[str, str]]:
        msg = await self.js.get_msg(self.stream, seq)
        return msg.subject, msg.data or b"", dict(msg.headers or {})

    async def count(self) -> int:
        return int((await self.js.stream_info(self.stream)).state.messages)


class TwinPublisher:
    def __init__(self) -> None:
        self.twin = MemoryPublisher()
        self.publisher: Publisher = self.twin
        self.subject = "cp"

    async def stored(self, seq: int) -> tuple[str, bytes, dict[str, str]]:
        found = self.twin.published[seq - 1]
        headers = dict(found.headers or {})
        # What the server keeps as headers, the twin keeps as fields
        if found.msg_id is not None:
            headers["Nats-Msg-Id"] = found.msg_id
        if found.ttl is not None:
            headers["Nats-TTL"] = str(found.ttl)
        return found.subject, found.data, headers

    async def count(self) -> int:
        return len(self.twin.published)


@dataclass
class ConsumerSide:
    port: Consumers
    stream: str
    """The stream whose durable `work` the port consumes."""
    put: Put


class StreamsSide(Protocol):
    """The Streams port, a Publisher storing onto its streams, and what a test does to the storage behind them:
    declare a stream, store a message, move a durable consumer."""

    streams: Streams
    publisher: Publisher

    async def make(self, name: str, subjects: list[str], *, max_msgs: int = 0, max_bytes: int = 0,
                   max_age: float = 0.0, per_subject: int = 0) -> None: ...

    async def put(self, subject: str, data: bytes, headers: dict[str, str] | None = None) -> int: ...

    async def durable(self, stream: str, name: str, filter_subject: str) -> None: ...

    async def deliver(self, stream: str, name: str, batch: int) -> list[int]: ...

    async def ack(self, stream: str, name: str, seq: int) -> None: ...


class TwinStreams:
    def __init__(self) -> None:
        # Each write a millisecond after the last, as the server's nanosecond stamps never tie.
        ticks = itertools.count()
        self.twin = MemoryStreams(clock=lambda: START + timedelta(milliseconds=next(ticks)))
        self.streams: Streams = self.twin
        self.publisher: Publisher = MemoryPublisher(self.twin)

    async def make(self, name: str, subjects: list[str], *, max_msgs: int = 0, max_bytes: int = 0,
                   max_age: float = 0.0, per_subject: int = 0) -> None:
        self.twin.add(name, subjects, max_msgs=max_msgs, max_bytes=max_bytes, max_age=max_age,
                      per_subject=per_subject)

    async def put(self, subject: str, data: bytes, headers: dict[str, str] | None = None) -> int:
        return self.twin.store(subject, data, headers)

    async def durable(self, stream: str, name: str, filter_subject: str) -> None:
        self.twin.add_consumer(stream, name, filter_subject)

    async def deliver(self, stream: str, name: str, batch: int) -> list[int]:
        return self.twin.deliver(stream, name, batch)

    async def ack(self, stream: str, name: str, seq: int) -> None:
        self.twin.ack(stream, name, seq)


class ServerStreamsSide:
    def __init__(self, js: Any) -> None:
        self.js = js
        self.streams: Streams = ServerStreams(js)
        self.publisher: Publisher = StreamPublisher(js)
        self._subs: dict[tuple[str, str], Any] = {}
        self._held: dict[int, Any] = {}

    async def make(self, name: str, subjects: list[str], *, max_msgs: int = 0, max_bytes: int = 0,
                   max_age: float = 0.0, per_subject: int = 0) -> None:
        await self.js.add_stream(StreamConfig(
            name=name, subjects=subjects, max_msgs=max_msgs or -1, max_bytes=max_bytes or -1, max_age=max_age,
            max_msgs_per_subject=per_subject or -1, discard=DiscardPolicy.NEW if max_bytes else DiscardPolicy.OLD))

    async def put(self, subject: str, data: bytes, headers: dict[str, str] | None = None) -> int:
        return int((await self.js.publish(subject, data, headers=headers)).seq)

    async def durable(self, stream: str, name: str, filter_subject: str) -> None:
        await self.js.add_consumer(stream, ConsumerConfig(durable_name=name, ack_policy=AckPolicy.EXPLICIT,
                                                          filter_subject=filter_subject))
        self._subs[stream, name] = await self.js.pull_subscribe_bind(name, stream=stream)

    async def deliver(self, stream: str, name: str, batch: int) -> list[int]:
        msgs = await self._subs[stream, name].fetch(batch, timeout=5)
        for msg in msgs:
            self._held[int(msg.metadata.sequence.stream)] = msg
        return [int(msg.metadata.sequence.stream) for msg in msgs]

    async def ack(self, stream: str, name: str, seq: int) -> None:
        await self._held.pop(seq).ack_sync()

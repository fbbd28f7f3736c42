"""In-memory twins of the bus's ports, for tests that need no server: they keep the contract that
tests/contract checks against both them and a real nats-server (revisions, conflicts, delete markers, watch
order, redelivery), and nothing more. Never used by a running service."""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TypeVar

import msgspec

from jetcron.bus.consume import work_loop
from jetcron.bus.kv import stored_size, value_of
from jetcron.bus.ports import ConsumerState, Durable, Endpoint, Handler, LeaseEntry, Stored, StreamState
from jetcron.bus.records import RecordOps, kind_of
from jetcron.bus.rpc import NoAnswer
from jetcron.core.errors import NotFound, StorageFull, WriteConflict
from jetcron.wire import subjects as s
from jetcron.wire.codec import decode, encode

T = TypeVar("T", bound=msgspec.Struct)

BeforeWrite = Callable[[str, str], Awaitable[None]]
"""Called with (operation, key) before a write lands: a test interleaves another writer there."""


def subject_matches(pattern: str, subject: str) -> bool:
    """NATS subject matching: `*` is one token, a final `>` one or more."""
    want, have = pattern.split("."), subject.split(".")
    for i, token in enumerate(want):
        if token == ">":
            return len(have) > i
        if i >= len(have) or (token != "*" and token != have[i]):
            return False
    return len(have) == len(want)


class MemoryRecords(RecordOps[T]):
    """ports.Records in a dict: one revision counter per bucket (as the stream's sequence), delete markers."""

    def __init__(self, name: str, kind: type[T], *, before_write: BeforeWrite | None = None,
                 ttl_of: Callable[[T], int | None] | None = None) -> None:
        self.name = name
        self.kind = kind
        self.before_write = before_write
        self.ttl_of = ttl_of
        self.ttls: dict[str, int | None] = {}
        """The TTL each key's last write asked for (as kv.Store sends it). Nothing here expires: the server's
        clock is what judges a TTL, and only tests against a real server may rely on one passing."""
        self._last: dict[str, tuple[bytes | None, int]] = {}
        self._seq = 0
        self._watchers: list[tuple[str, asyncio.Queue[tuple[str, T | None, int]]]] = []

    async def get(self, key: str) -> tuple[T, int]:
        data, revision = self._last.get(key, (None, 0))
        if data is None:
            raise NotFound(kind_of(self.name), key)
        return decode(data, self.kind), revision

    async def _write(self, op: str, key: str, value: T | None, expect: int | None) -> int:
        if self.before_write is not None:
            await self.before_write(op, key)
        data, revision = self._last.get(key, (None, 0))
        if op == "create" and data is not None:
            raise WriteConflict(f"create {self.name}/{key}: written by someone else first")
        if expect is not None and revision != expect:
            raise WriteConflict(f"{op} {self.name}/{key}: written by someone else first")
        self._seq += 1
        self._last[key] = (None if value is None else encode(value), self._seq)
        self.ttls[key] = None if value is None or self.ttl_of is None else self.ttl_of(value)
        stored = None if value is None else decode(encode(value), self.kind)
        for pattern, queue in self._watchers:
            if subject_matches(pattern, key):
                queue.put_nowait((key, stored, self._seq))
        return self._seq

    async def create(self, key: str, value: T) -> int:
        return await self._write("create", key, value, None)

    async def update(self, key: str, value: T, revision: int) -> int:
        return await self._write("update", key, value, revision)

    async def put(self, key: str, value: T) -> int:
        return await self._write("write", key, value, None)

    async def delete(self, key: str) -> None:
        await self._write("delete", key, None, None)

    async def keys(self, pattern: str = ">") -> list[str]:
        """As the server's per-subject counts: a key whose last write is a delete marker is listed too."""
        return [key for key in self._last if subject_matches(pattern, key)]

    async def mark(self) -> tuple[int, int]:
        """As the server's stream state: one message per key (its last write, or the delete marker)."""
        return self._seq, len(self._last)

    async def watch(self, pattern: str = ">") -> AsyncIterator[tuple[str, T | None, int]]:
        queue: asyncio.Queue[tuple[str, T | None, int]] = asyncio.Queue()
        # The snapshot and the live queue are taken together (no await between): no write falls in a gap.
        current = [(key, decode(data, self.kind), revision) for key, (data, revision) in self._last.items()
                   if data is not None and subject_matches(pattern, key)]
        entry = (pattern, queue)
        self._watchers.append(entry)
        try:
            for item in sorted(current, key=lambda c: c[2]):
                yield item
            yield "", None, 0
            while True:
                yield await queue.get()
        finally:
            self._watchers.remove(entry)

    async def last(self, pattern: str) -> tuple[T, int] | None:
        """As the server's message get by last subject: the key under `pattern` written last (the highest
        revision), None if none is or its last write was a delete."""
        written = [(revision, data) for key, (data, revision) in self._last.items() if subject_matches(pattern, key)]
        if not written:
            return None
        revision, data = max(written, key=lambda w: w[0])
        return None if data is None else (decode(data, self.kind), revision)


@dataclass(frozen=True)
class MemoryPosition:
    stream: int


@dataclass(frozen=True)
class MemoryDelivery:
    sequence: MemoryPosition
    num_delivered: int


@dataclass
class MemoryMessage:
    """ports.Message: settling it tells its queue (ack and term end it, nak brings it back after the delay)."""

    subject: str
    data: bytes
    headers: dict[str, str] | None = None
    seq: int = 0
    delivered: int = 1
    queue: MemoryQueue | None = None
    responses: list[bytes] = field(default_factory=list)
    """What `respond` sent, in order."""
    responded: asyncio.Event = field(default_factory=asyncio.Event)
    """Set by the first `respond`: a handler may answer from a task of its own, after it has returned."""

    @property
    def metadata(self) -> MemoryDelivery:
        return MemoryDelivery(MemoryPosition(self.seq), self.delivered)

    async def ack(self) -> None:
        if self.queue is not None:
            self.queue.done(self.seq)

    async def nak(self, delay: float | None = None) -> None:
        if self.queue is not None:
            self.queue.redeliver(self.seq, delay or 0.0)

    async def term(self) -> None:
        await self.ack()  # neither comes back; the server counts them apart, nothing here reads that

    async def in_progress(self) -> None:
        if self.queue is not None:
            self.queue.touch(self.seq)

    async def respond(self, data: bytes) -> None:
        self.responses.append(data)
        self.responded.set()


class MemoryQueue:
    """A work queue with one pull consumer, as a stream plus durable consumer: publish (deduplicated by message
    id), fetch, and redelivery of what is nak'd (after its delay) or not acked within `ack_wait`."""

    def __init__(self, *, ack_wait: float = 30.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.ack_wait = ack_wait
        self.clock = clock
        self._seq = 0
        self._ids: dict[str, int] = {}
        self._messages: dict[int, tuple[str, bytes, dict[str, str] | None]] = {}
        self._due: dict[int, float] = {}
        """Messages not yet acked or terminated: when each may be delivered (again)."""
        self._deliveries: dict[int, int] = {}
        self._arrived = asyncio.Event()

    async def publish(self, subject: str, data: bytes, *, headers: dict[str, str] | None = None,
                      msg_id: str | None = None) -> int:
        if msg_id is not None and msg_id in self._ids:
            return self._ids[msg_id]  # a duplicate within the window: stored once, its first sequence answered
        self._seq += 1
        if msg_id is not None:
            self._ids[msg_id] = self._seq
        self._messages[self._seq] = (subject, data, headers)
        self._due[self._seq] = self.clock()
        self._arrived.set()
        return self._seq

    @property
    def unsettled(self) -> list[int]:
        """The sequences of the messages neither acked nor terminated yet."""
        return sorted(self._due)

    async def fetch(self, batch: int, timeout: float) -> list[MemoryMessage]:
        """Up to `batch` deliverable messages, oldest first; waits up to `timeout` for one (TimeoutError)."""
        deadline = self.clock() + timeout
        while True:
            now = self.clock()
            ready = sorted(seq for seq, due in self._due.items() if due <= now)[:batch]
            if ready:
                return [self._deliver(seq, now) for seq in ready]
            if now >= deadline:
                raise TimeoutError("no message")
            self._arrived.clear()
            wait = min([deadline - now, *(due - now for due in self._due.values())])
            try:
                await asyncio.wait_for(self._arrived.wait(), timeout=max(wait, 0.001))
            except TimeoutError:
                pass

    def _deliver(self, seq: int, now: float) -> MemoryMessage:
        self._deliveries[seq] = self._deliveries.get(seq, 0) + 1
        self._due[seq] = now + self.ack_wait
        subject, data, headers = self._messages[seq]
        return MemoryMessage(subject, data, headers, seq=seq, delivered=self._deliveries[seq], queue=self)

    def redeliver(self, seq: int, delay: float) -> None:
        if seq in self._due:
            self._due[seq] = self.clock() + delay
            self._arrived.set()

    def touch(self, seq: int) -> None:
        if seq in self._due:
            self._due[seq] = self.clock() + self.ack_wait

    def done(self, seq: int) -> None:
        self._due.pop(seq, None)


class MemoryLeaseLog:
    """ports.LeaseLog in a dict of subjects, as the lease buckets store them: one subject per key, per writer for
    a run lease's claims, each write checked against the last of the key's subjects (subjects.lease_filter).

    It does not stand in for the server's TTL clock: nothing here expires by itself. A write's TTL is kept
    (`ttl_of`), and a test lets a lease lapse by saying so (`expire`), as the server would once that TTL had
    passed on its own clock. Liveness judged by time is for the tests against a real server."""

    def __init__(self, clock: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        self.clock = clock
        """Stamps each write, as the server stamps it with its own clock (a test's clock where its runs are due at
        instants of its own)."""
        self._groups: dict[str, dict[str, LeaseEntry]] = {}
        """By key (subjects.lease_filter: every writer's claim on a run is the run's): each subject's last write."""
        self._seq = 0
        self.writes = 0
        """Writes stored so far (a test counts a protocol's writes)."""

    async def write(self, key: str, writer: str, data: bytes, ttl: float, expected: int | None) -> int:
        last = await self.last(key)
        if expected is not None and expected != (last.revision if last is not None else 0):
            raise WriteConflict(f"lease {key}: written by someone else first")
        self._seq += 1
        self.writes += 1
        subject = s.lease_subject(key, writer)
        self._groups.setdefault(s.lease_filter(key), {})[subject] = LeaseEntry(
            data=data, revision=self._seq, written_at=self.clock(), ttl=float(max(1, math.ceil(ttl))),
            writer=s.lease_writer(subject))
        return self._seq

    async def last(self, key: str) -> LeaseEntry | None:
        return max(self._groups.get(s.lease_filter(key), {}).values(), key=lambda entry: entry.revision,
                   default=None)

    async def own(self, key: str, writer: str) -> LeaseEntry | None:
        return self._groups.get(s.lease_filter(key), {}).get(s.lease_subject(key, writer))

    async def keys(self, pattern: str) -> list[str]:
        prefix = s.kv_subject(s.lease_bucket(pattern), "")
        return [subject[len(prefix):] for group in self._groups.values() for subject in group
                if subject.startswith(prefix) and subject_matches(pattern, subject[len(prefix):])]

    def ttl_of(self, key: str) -> float | None:
        """The TTL the key's last write carried."""
        last = max(self._groups.get(s.lease_filter(key), {}).values(), key=lambda e: e.revision, default=None)
        return None if last is None else last.ttl

    def expire(self, key: str, writer: str | None = None) -> None:
        """The key's writes lapse (only `writer`'s claim, when given), as the server drops them once their TTL
        has passed."""
        if writer is None:
            self._groups.pop(s.lease_filter(key), None)
        else:
            self._groups.get(s.lease_filter(key), {}).pop(s.lease_subject(key, writer), None)


@dataclass(frozen=True)
class Published:
    subject: str
    data: bytes
    headers: dict[str, str] | None
    msg_id: str | None
    ttl: int | None


class MemoryPublisher:
    """ports.Publisher in a list: every message stored once per message id (the server's duplicate window, here
    without an end), in order; a subject routed to a MemoryQueue (`route`) is delivered there too, as a stream's
    consumer would take it. Trace headers are not added: no span crosses a twin."""

    def __init__(self, streams: MemoryStreams | None = None) -> None:
        self.published: list[Published] = []
        self._ids: dict[str, int] = {}
        self._routes: list[tuple[str, MemoryQueue]] = []
        self.streams = streams
        """Where a message whose subject a declared stream takes is stored too (its sequence is then the stream's,
        and an expected last sequence in its headers is checked): None, a list only."""

    def route(self, pattern: str, queue: MemoryQueue) -> None:
        self._routes.append((pattern, queue))

    def on(self, pattern: str) -> list[Published]:
        """What was published on subjects matching `pattern`, in order."""
        return [p for p in self.published if subject_matches(pattern, p.subject)]

    async def publish(self, subject: str, message: Any, *, msg_id: str | None = None,
                      headers: dict[str, str] | None = None, ttl: int | None = None) -> int:
        if msg_id is not None and msg_id in self._ids:
            return self._ids[msg_id]
        data = message if isinstance(message, bytes) else encode(message)
        seq = len(self.published) + 1
        if self.streams is not None and self.streams.stream_of(subject) is not None:
            seq = self.streams.store(subject, data, headers)
        self.published.append(Published(subject, data, dict(headers) if headers else None, msg_id, ttl))
        if msg_id is not None:
            self._ids[msg_id] = seq
        for pattern, queue in self._routes:
            if subject_matches(pattern, subject):
                await queue.publish(subject, data, headers=headers, msg_id=msg_id)
        return seq


class _Served:
    def __init__(self, rpc: MemoryRpc, subject: str, queue: str, handler: Handler) -> None:
        self.rpc, self.subject, self.queue, self.handler = rpc, subject, queue, handler

    async def unsubscribe(self) -> None:
        if self in self.rpc.served:
            self.rpc.served.remove(self)


class MemoryRpc:
    """ports.Rpc in one process: a request goes to one handler serving its subject (one per queue group, the first
    served), a notice to every plain subscriber and one member of each group; handlers run at once, in the
    caller's task. A request nobody serves has no responders; one whose handler does not answer within the
    timeout has no answer."""

    def __init__(self) -> None:
        self.served: list[_Served] = []
        """What is served now, in the order it was served."""
        self.notices: list[tuple[str, bytes]] = []
        """Every one-way message sent, in order (delivered or not)."""
        self.up = True

    def _takers(self, subject: str) -> list[_Served]:
        takers: list[_Served] = []
        groups: set[str] = set()
        for served in self.served:
            if not subject_matches(served.subject, subject):
                continue
            if served.queue:
                if served.queue in groups:
                    continue
                groups.add(served.queue)
            takers.append(served)
        return takers

    async def request(self, subject: str, data: bytes, *, timeout: float,
                      headers: dict[str, str] | None = None) -> MemoryMessage:
        takers = self._takers(subject)
        if not takers:
            raise NoAnswer(f"{subject}: no responders", responders=False)
        msg = MemoryMessage(subject, data, dict(headers) if headers else None)
        deadline = asyncio.get_running_loop().time() + timeout
        try:
            await asyncio.wait_for(takers[0].handler(msg), timeout)
            if not msg.responded.is_set():
                await asyncio.wait_for(msg.responded.wait(), max(0.0, deadline - asyncio.get_running_loop().time()))
        except TimeoutError:
            pass
        if not msg.responses:
            raise NoAnswer(f"{subject}: no answer within {timeout:g}s", responders=True)
        return MemoryMessage(subject, msg.responses[0])

    async def serve(self, subject: str, handler: Handler, *, queue: str = "", flush: bool = False) -> _Served:
        served = _Served(self, subject, queue, handler)
        self.served.append(served)
        return served

    async def notify(self, subject: str, data: bytes) -> None:
        self.notices.append((subject, data))
        for served in self._takers(subject):
            await served.handler(MemoryMessage(subject, data))

    async def flush(self) -> None:
        return None

    @property
    def connected(self) -> bool:
        """The twin has no connection to lose: a test sets this to play one that is down."""
        return self.up

    async def endpoints(self, *, name: str, version: str, description: str, queue: str,
                        endpoints: Sequence[Endpoint]) -> _Endpoints:
        return _Endpoints([await self.serve(subject, handler, queue=queue) for _name, subject, handler in endpoints])


class _Endpoints:
    def __init__(self, served: list[_Served]) -> None:
        self.served = served

    async def stop(self) -> None:
        for served in self.served:
            await served.unsubscribe()


class MemoryBuckets:
    """ports.Buckets in memory: one MemoryRecords per bucket and type, the same one each time it is opened."""

    def __init__(self) -> None:
        self.opened: dict[tuple[str, type[Any]], Any] = {}

    async def open(self, name: str, kind: type[T]) -> MemoryRecords[T]:
        made: MemoryRecords[T] = self.opened.setdefault((name, kind), MemoryRecords(name, kind))
        return made


class MemoryConsumers:
    """ports.Consumers in memory: one MemoryQueue per stream and durable (`queue`: a test fills it, or routes a
    MemoryPublisher's subjects to it), consumed by the same work loop as the server's consumers."""

    def __init__(self) -> None:
        self.queues: dict[tuple[str, str], MemoryQueue] = {}
        self.made: dict[tuple[str, str], Durable] = {}
        """The durable consumers made through `ensure`, as asked."""

    def queue(self, stream: str, durable: str) -> MemoryQueue:
        return self.queues.setdefault((stream, durable), MemoryQueue())

    async def consume(self, stream: str, durable: str, handler: Handler, *, batch: int = 256,
                      concurrency: int = 64, stop: asyncio.Event | None = None,
                      remake: Callable[[], Awaitable[object]] | None = None) -> None:
        await work_loop(self.queue(stream, durable), handler, batch=batch, concurrency=concurrency, stop=stop)

    async def ensure(self, stream: str, durable: Durable) -> str:
        self.made[stream, durable.name] = durable
        self.queue(stream, durable.name)
        return durable.name


@dataclass
class _Stream:
    subjects: list[str]
    max_msgs: int
    max_bytes: int
    max_age: float
    per_subject: int
    messages: dict[int, MemoryMessage] = field(default_factory=dict)
    sizes: dict[int, int] = field(default_factory=dict)
    times: dict[int, datetime] = field(default_factory=dict)
    last_seq: int = 0
    consumers: dict[str, _Durable] = field(default_factory=dict)


@dataclass
class _Durable:
    filter: str
    delivered: int = 0
    """The stream sequence delivered last."""
    unacked: set[int] = field(default_factory=set)


class MemoryStreams:
    """ports.Streams over streams kept in memory: a test declares a stream (`add`), stores messages on it (`store`,
    or a MemoryPublisher given these streams), and moves a durable consumer (`add_consumer`, `deliver`, `ack`). The
    limits are reported and max_bytes refuses what does not fit (a stream that discards new), but nothing expires:
    no max_age, no TTL passes here. Sizes are the server's own byte count (kv.stored_size)."""

    def __init__(self, clock: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        self.clock = clock
        self._streams: dict[str, _Stream] = {}
        self._tails: list[tuple[str, asyncio.Queue[MemoryMessage]]] = []

    def add(self, name: str, subjects: list[str], *, max_msgs: int = 0, max_bytes: int = 0, max_age: float = 0.0,
            per_subject: int = 0) -> None:
        """A stream taking `subjects`; `per_subject`: messages kept per subject (1 for a bucket of one value per
        key), 0: all."""
        self._streams[name] = _Stream(subjects, max_msgs, max_bytes, max_age, per_subject)

    def _stream(self, name: str) -> _Stream:
        found = self._streams.get(name)
        if found is None:
            raise NotFound("stream", name)
        return found

    def stream_of(self, subject: str) -> str | None:
        """The stream that takes `subject`, if any declared does."""
        return next((name for name, st in self._streams.items()
                     if any(subject_matches(p, subject) for p in st.subjects)), None)

    def store(self, subject: str, data: bytes, headers: dict[str, str] | None = None) -> int:
        """Store a message on the stream that takes its subject; its sequence. WriteConflict when it expects a last
        sequence of its subject that is not the last; StorageFull when it does not fit max_bytes."""
        name = self.stream_of(subject)
        if name is None:
            raise NotFound("stream for subject", subject)
        st = self._streams[name]
        expected = (headers or {}).get(s.HDR_EXPECTED_LAST_SUBJECT_SEQ)
        if expected is not None:
            last = max((seq for seq, m in st.messages.items() if m.subject == subject), default=0)
            if last != int(expected):
                raise WriteConflict(f"{subject}: written by someone else first")
        size = stored_size(subject, data, headers)
        if st.max_bytes and sum(st.sizes.values()) + size > st.max_bytes:
            raise StorageFull(f"publish {subject}: storage full (stream {name} at its max_bytes {st.max_bytes})")
        st.last_seq += 1
        seq = st.last_seq
        msg = MemoryMessage(subject, data, dict(headers) if headers else None, seq=seq)
        st.messages[seq], st.sizes[seq], st.times[seq] = msg, size, self.clock()
        if st.per_subject:
            same = [q for q, m in st.messages.items() if m.subject == subject]
            for old in same[:-st.per_subject]:
                self._drop(st, old)
        if st.max_msgs and len(st.messages) > st.max_msgs:
            self._drop(st, min(st.messages))
        for pattern, queue in self._tails:
            if subject_matches(pattern, subject):
                queue.put_nowait(msg)
        return seq

    @staticmethod
    def _drop(st: _Stream, seq: int) -> None:
        del st.messages[seq], st.sizes[seq], st.times[seq]
        for durable in st.consumers.values():
            durable.unacked.discard(seq)

    def add_consumer(self, stream: str, durable: str, filter_subject: str = ">") -> None:
        self._stream(stream).consumers[durable] = _Durable(filter_subject)

    def deliver(self, stream: str, durable: str, batch: int) -> list[int]:
        """The sequences of the next `batch` messages delivered to the durable (left unacked)."""
        st = self._stream(stream)
        consumer = st.consumers[durable]
        seqs = [q for q in sorted(st.messages) if q > consumer.delivered
                and subject_matches(consumer.filter, st.messages[q].subject)][:batch]
        if seqs:
            consumer.delivered = seqs[-1]
        consumer.unacked.update(seqs)
        return seqs

    def ack(self, stream: str, durable: str, seq: int) -> None:
        self._stream(stream).consumers[durable].unacked.discard(seq)

    async def state(self, stream: str) -> StreamState:
        st = self._stream(stream)
        return StreamState(messages=len(st.messages), bytes=sum(st.sizes.values()),
                           first_seq=min(st.messages, default=st.last_seq + 1) if st.last_seq else 0,
                           last_seq=st.last_seq, max_msgs=st.max_msgs, max_bytes=st.max_bytes, max_age=st.max_age)

    async def consumer(self, stream: str, durable: str) -> ConsumerState:
        st = self._stream(stream)
        found = st.consumers.get(durable)
        if found is None:
            raise NotFound("consumer", f"{stream}/{durable}")
        mine = [q for q, m in st.messages.items() if subject_matches(found.filter, m.subject)]
        floor = min(found.unacked, default=found.delivered + 1) - 1
        return ConsumerState(pending=len([q for q in mine if q > found.delivered]), ack_pending=len(found.unacked),
                             ack_floor=max(floor, 0))

    async def counts(self, stream: str, subjects: str) -> dict[str, int]:
        counted: dict[str, int] = {}
        for m in self._stream(stream).messages.values():
            if subject_matches(subjects, m.subject):
                counted[m.subject] = counted.get(m.subject, 0) + 1
        return counted

    async def last(self, stream: str, subject: str) -> Stored | None:
        st = self._stream(stream)
        seq = max((q for q, m in st.messages.items() if m.subject == subject), default=None)
        if seq is None:
            return None
        msg = st.messages[seq]
        data = value_of(msg.data, msg.headers)
        return None if data is None else Stored(data=data, seq=seq, time=st.times[seq], headers=msg.headers)

    async def purge(self, stream: str, *, subject: str | None = None, below: int | None = None) -> None:
        if subject is None and below is None:
            raise ValueError(f"purge of {stream} names neither a subject nor a sequence: it would empty the stream")
        st = self._stream(stream)
        for seq in [q for q, m in st.messages.items()
                    if (subject is None or subject_matches(subject, m.subject)) and (below is None or q < below)]:
            self._drop(st, seq)

    async def oldest(self, bucket: str, kind: type[T], after: int = 0) -> AsyncIterator[tuple[str, T, int, int]]:
        st = self._stream(s.kv_stream(bucket))
        prefix = s.kv_subject(bucket, "")
        for seq in [q for q in sorted(st.messages) if q > after]:
            msg = st.messages.get(seq)
            if msg is None or (data := value_of(msg.data, msg.headers)) is None:
                continue
            try:
                value = decode(data, kind)
            except msgspec.DecodeError:
                continue
            yield msg.subject[len(prefix):], value, st.sizes[seq], seq

    def _matching(self, subject: str) -> list[tuple[datetime, MemoryMessage]]:
        """Every stored message on `subject`, in the order stored (streams apart: by time, then sequence)."""
        found = [(st.times[q], q, m) for st in self._streams.values() for q, m in st.messages.items()
                 if subject_matches(subject, m.subject)]
        return [(at, m) for at, _q, m in sorted(found, key=lambda f: (f[0], f[1]))]

    async def read(self, subject: str, *, idle: float,
                   after: int = 0) -> AsyncGenerator[tuple[MemoryMessage, int] | None, None]:
        queue: asyncio.Queue[MemoryMessage] = asyncio.Queue()
        entry = (subject, queue)
        self._tails.append(entry)
        try:
            stored = [m for _at, m in self._matching(subject) if m.seq > after]
            for i, msg in enumerate(stored):
                yield msg, len(stored) - i - 1 + queue.qsize()
            while True:
                try:
                    msg = await asyncio.wait_for(queue.get(), timeout=idle)
                except TimeoutError:
                    yield None
                    continue
                yield msg, queue.qsize()
        finally:
            self._tails.remove(entry)

    async def newest(self, stream: str, subject: str, limit: int) -> list[bytes]:
        st = self._stream(stream)
        window = sorted(st.messages)[-limit:] if limit > 0 else []
        return [st.messages[q].data for q in window if subject_matches(subject, st.messages[q].subject)]

    async def written_since(self, stream: str, subject: str, since: datetime,
                            cap: int) -> tuple[list[MemoryMessage], bool]:
        st = self._stream(stream)
        found = [st.messages[q] for q in sorted(st.messages)
                 if st.times[q] >= since and subject_matches(subject, st.messages[q].subject)]
        return found[:cap], len(found) > cap

    async def tail(self, subject: str) -> AsyncGenerator[MemoryMessage, None]:
        queue: asyncio.Queue[MemoryMessage] = asyncio.Queue()
        entry = (subject, queue)
        self._tails.append(entry)
        try:
            while True:
                yield await queue.get()
        finally:
            self._tails.remove(entry)

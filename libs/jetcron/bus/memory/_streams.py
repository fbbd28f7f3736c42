"""The twin of ports.Streams: streams kept in memory, with their limits reported and max_bytes enforced."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TypeVar

import msgspec

from jetcron.bus.kv import stored_size, value_of
from jetcron.bus.memory._match import subject_matches
from jetcron.bus.memory._queue import MemoryMessage
from jetcron.bus.ports import ConsumerState, Stored, StreamState
from jetcron.core.errors import NotFound, StorageFull, WriteConflict
from jetcron.wire import subjects as s
from jetcron.wire.codec import decode

T = TypeVar("T", bound=msgspec.Struct)

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

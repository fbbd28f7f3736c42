"""What services may ask of the bus, as small Protocols: the real adapters (kv.Store, nats-py's messages) and
the in-memory twins (jetcron.bus.memory) both satisfy them, and tests/contract runs one suite against both.

Services name these, never nats-py's classes, and reach them through their Context; nats-py's own handles
(jetcron.bus.handles) stay with the adapters and the composition roots that build these from them, so bus stays the
only package that imports nats (tests/unit/test_core_purity.py and tests/unit/test_layers.py check it), and nothing
here is a nats-py type.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Sequence
from datetime import datetime
from typing import Any, Protocol, TypeVar

import msgspec

from jetcron.wire.messages import ServiceInstance

T = TypeVar("T", bound=msgspec.Struct)


class Position(Protocol):
    @property
    def stream(self) -> int:
        """The message's sequence in its stream."""
        ...


class Delivery(Protocol):
    @property
    def sequence(self) -> Position: ...

    @property
    def num_delivered(self) -> int:
        """1 on the first delivery; counts redeliveries."""
        ...


class Request(Protocol):
    """What any delivered message carries, and the answer to it (a service endpoint's handler gets this)."""

    @property
    def subject(self) -> str: ...

    @property
    def data(self) -> bytes: ...

    @property
    def headers(self) -> dict[str, str] | None: ...

    async def respond(self, data: bytes) -> None: ...


class Message(Request, Protocol):
    """A message as a handler gets it: from a durable consumer (ack, nak, term, in_progress, metadata) or a
    plain subscription (respond)."""

    @property
    def metadata(self) -> Delivery: ...

    async def ack(self) -> None: ...

    async def nak(self, delay: float | None = None) -> None: ...

    async def term(self) -> None: ...

    async def in_progress(self) -> None: ...


Handler = Callable[[Message], Awaitable[None]]


class Records(Protocol[T]):
    """A bucket of records of one type, each key's writes ordered by revision (the stream sequence).

    Errors are jetcron's: NotFound (naming the kind and key), WriteConflict (a create on an existing key, an
    update against a stale revision), Unavailable (the storage did not answer or is full; nothing stored)."""

    name: str
    kind: type[T]

    async def get(self, key: str) -> tuple[T, int]: ...

    async def maybe(self, key: str) -> tuple[T, int] | None: ...

    async def create(self, key: str, value: T) -> int: ...

    async def update(self, key: str, value: T, revision: int) -> int: ...

    async def put(self, key: str, value: T) -> int: ...

    async def delete(self, key: str) -> None: ...

    async def keys(self, pattern: str = ">") -> list[str]: ...

    async def mark(self) -> tuple[int, int]:
        """Where the bucket stands, as (its last revision, how many messages it holds): two equal marks mean no key
        was written, deleted, purged or aged out between them, so a listing of its keys taken between them holds."""
        ...

    def watch(self, pattern: str = ">") -> AsyncIterator[tuple[str, T | None, int]]: ...

    async def page(self, keys: Sequence[str], limit: int,
                   keep: Callable[[T], bool]) -> tuple[list[T], str | None]: ...

    async def change(self, key: str, decide: Callable[[T], T | None], *, copy: tuple[T, int] | None = None,
                     tries: int = 8) -> tuple[T, T, int] | None: ...

    async def last(self, pattern: str) -> tuple[T, int] | None:
        """The value written last under a key pattern and its revision, in one read however many keys match;
        None when none does or that last write was a delete."""
        ...


class WorkQueue(Protocol):
    """A durable consumer's side of a work queue (consume.PullQueue; twin: memory.MemoryQueue)."""

    async def fetch(self, batch: int, timeout: float) -> Sequence[Message]:
        """Up to `batch` messages, oldest first; TimeoutError when none came within `timeout` seconds."""
        ...


class LeaseEntry(msgspec.Struct, frozen=True, kw_only=True):
    """The last write of a lease key, as stored."""

    data: bytes
    revision: int
    """The write's sequence: the fencing token of the lease it granted or renewed."""
    written_at: datetime | None
    """The storage's own time of the write (the server's clock)."""
    ttl: float | None
    """The TTL the write carried; None when it carried none jetcron wrote."""
    writer: str
    """A run lease's claim: who wrote it, from where it is stored; "" for any other lease."""


class LeaseLog(Protocol):
    """Where leases are written (jetcron.bus.lease's Leases decides what to write; this stores it): each key's writes
    carry their own TTL and expire by the storage's clock, and each may be checked against the revision of the
    key's last write, every writer's claim on a run counting as the key's (subjects.lease_filter).

    Errors are jetcron's: WriteConflict (`expected` is not the key's last revision; 0: the key holds nothing
    live), Unavailable (the storage did not answer or is full; nothing stored)."""

    async def write(self, key: str, writer: str, data: bytes, ttl: float, expected: int | None) -> int:
        """Store `data` as `writer`'s write of `key` for `ttl` seconds (rounded up to whole seconds); its
        revision. `expected=None` writes whatever was written since."""
        ...

    async def last(self, key: str) -> LeaseEntry | None:
        """The key's last live write; None when it has none (never written, or expired)."""
        ...

    async def own(self, key: str, writer: str) -> LeaseEntry | None:
        """`writer`'s own last live claim on a key stored as claims (a run or agent lease), whatever others
        wrote after it; None when it has none."""
        ...

    async def keys(self, pattern: str) -> list[str]:
        """The stored names of the live lease keys matching a subject pattern (a run lease's include its writer)."""
        ...


class Publisher(Protocol):
    """Where commands and events go (jetcron.bus.publish.StreamPublisher on JetStream; twin: memory.MemoryPublisher):
    stored before the call returns, a message id storing a retry once (the stream's duplicate window).

    Errors are jetcron's: Unavailable (not stored: the storage did not answer or is full), Misconfigured (no
    stream takes the subject)."""

    async def publish(self, subject: str, message: Any, *, msg_id: str | None = None,
                      headers: dict[str, str] | None = None, ttl: int | None = None) -> int:
        """Store `message` (a struct, encoded; or bytes as they are) on `subject`; its sequence in its stream.
        `ttl`: whole seconds it is kept (a run's event or output: jetcron.core.lifecycle.retention.stream_ttl)."""
        ...


class Subscribed(Protocol):
    """A subscription `Rpc.serve` made."""

    async def unsubscribe(self) -> None: ...


Endpoint = tuple[str, str, Callable[[Request], Awaitable[None]]]
"""(name, subject, handler): one endpoint of a service Rpc.endpoints serves."""


class Endpoints(Protocol):
    """What Rpc.endpoints serves, until stopped."""

    async def stop(self) -> None: ...


class Rpc(Protocol):
    """Core NATS request/reply and one-way messages (jetcron.bus.rpc.NatsRpc; twin: memory.MemoryRpc): for services that
    answer or ask without JetStream, and the agents' control messages. Nothing is stored: a message nobody
    listens to is gone.

    Errors are jetcron's: rpc.NoAnswer (no responder on the subject, or none within the timeout)."""

    async def request(self, subject: str, data: bytes, *, timeout: float,
                      headers: dict[str, str] | None = None) -> Request:
        """The reply to one request."""
        ...

    async def serve(self, subject: str, handler: Handler, *, queue: str = "", flush: bool = False) -> Subscribed:
        """Call `handler` with every message on `subject` (one member of the queue group `queue`, when given);
        `flush`: return once the server has the subscription."""
        ...

    async def notify(self, subject: str, data: bytes) -> None:
        """A one-way message: whoever serves the subject gets it, if anyone does."""
        ...

    async def flush(self) -> None:
        """Wait until everything sent so far has been processed."""
        ...

    @property
    def connected(self) -> bool:
        """Whether the connection to the server is up now."""
        ...

    async def endpoints(self, *, name: str, version: str, description: str, queue: str,
                        endpoints: Sequence[Endpoint]) -> Endpoints:
        """A named service answering each endpoint's subject in the queue group `queue` (on the server a nats.micro
        service, which answers `$SRV.*` with its counts too); returns once every subscription is in place."""
        ...


class Buckets(Protocol):
    """Opens a bucket of records of one type by its name (jetcron.bus.kv.ServerBuckets; twin: memory.MemoryBuckets): for
    the buckets a service reads or writes besides the Context's own (jobs, runs, cursors, agents, tenants,
    calendars)."""

    async def open(self, name: str, kind: type[T]) -> Records[T]: ...


class StreamState(msgspec.Struct, frozen=True, kw_only=True):
    """What a stream holds now, by the server's own counts, and its limits (0: none)."""

    messages: int
    bytes: int
    first_seq: int
    last_seq: int
    starts_at: int = 0
    """The sequence the stream was made to start from (a fenced bucket's: the fencing floor at its making,
    topology.FENCED_BUCKETS); 0 for one that started at 1."""
    max_msgs: int = 0
    max_bytes: int = 0
    max_age: float = 0.0
    """Seconds a message is kept at most."""


class ConsumerState(msgspec.Struct, frozen=True, kw_only=True):
    pending: int
    """Messages not delivered yet."""
    ack_pending: int
    """Delivered, neither acked nor terminated."""
    ack_floor: int
    """The stream sequence up to which every message is acked."""


class Stored(msgspec.Struct, frozen=True, kw_only=True):
    """A stored message's value, as Streams.last reads it."""

    data: bytes
    seq: int
    time: datetime | None = None
    """The storage's own time of the write."""
    headers: dict[str, str] | None = None


class Streams(Protocol):
    """Streams and durable consumers as their storage counts them, their messages read without a durable consumer,
    and history let go early (jetcron.bus.streams.ServerStreams; twin: memory.MemoryStreams): for the services that size
    a queue, judge whether a consumer is behind, watch new events, or shed history under storage pressure.

    Errors are jetcron's: NotFound (a stream or consumer that does not exist), Unavailable (no answer)."""

    async def state(self, stream: str) -> StreamState: ...

    async def consumer(self, stream: str, durable: str) -> ConsumerState: ...

    async def counts(self, stream: str, subjects: str) -> dict[str, int]:
        """Messages held per subject matching `subjects` (a filter with wildcards); subjects with none left out."""
        ...

    async def last(self, stream: str, subject: str) -> Stored | None:
        """The last message on `subject` when it gives a value; None when there is none, or it is a delete marker
        or a purge (kv.value_of)."""
        ...

    async def purge(self, stream: str, *, subject: str | None = None, below: int | None = None) -> None:
        """Let go of the stream's messages on `subject` (a filter), or of those below sequence `below`, or both;
        nothing is left of them, no marker."""
        ...

    def oldest(self, bucket: str, kind: type[T], after: int = 0) -> AsyncIterator[tuple[str, T, int, int]]:
        """(key, value, stored size, sequence) of a bucket's values the longest unwritten first, from just after
        sequence `after`; deletes and undecodable values passed over. For a bucket that keeps one value per key."""
        ...

    def tail(self, subject: str) -> AsyncGenerator[Request, None]:
        """The messages stored on `subject` from now on, in order, for as long as the iterator lives."""
        ...

    def read(self, subject: str, *, idle: float, after: int = 0) -> AsyncGenerator[tuple[Message, int] | None, None]:
        """Every message stored on `subject` after stream sequence `after` (0: all), oldest first, then those stored
        later, for as long as the iterator lives: each with how many more were stored when it was read (0: caught
        up; its `metadata.sequence.stream` says where it is), and None after each `idle` seconds with nothing new.
        For a subject of one stream."""
        ...

    async def newest(self, stream: str, subject: str, limit: int) -> list[bytes]:
        """The bodies of those of the stream's newest `limit` messages that are on `subject`, oldest first."""
        ...

    async def written_since(self, stream: str, subject: str, since: datetime,
                            cap: int) -> tuple[list[Request], bool]:
        """The messages on `subject` stored since `since` (the storage's clock), oldest first, at most `cap` of
        them, and whether more were there."""
        ...


class Durable(msgspec.Struct, frozen=True, kw_only=True):
    """A durable consumer to make: explicit acks, what it takes, how long a delivery may stay unacked, how many
    may, and how long it outlives its last reader."""

    name: str
    filter_subject: str
    ack_wait: float = 30.0
    max_ack_pending: int = 1000
    inactive_threshold: float = 0.0
    """Seconds without a reader before the server removes it; 0: never."""


class Consumers(Protocol):
    """Consumes a stream's durable consumer (jetcron.bus.consume.ServerConsumers; twin: memory.MemoryConsumers): each
    message through `handler` and settled by what it returns or raises (consume.settle), until `stop` is set."""

    async def consume(self, stream: str, durable: str, handler: Handler, *, batch: int = 256,
                      concurrency: int = 64, stop: asyncio.Event | None = None,
                      remake: Callable[[], Awaitable[object]] | None = None) -> None: ...

    async def ensure(self, stream: str, durable: Durable) -> str:
        """Make the durable consumer unless it is there as asked; its name. A stream not made yet (by whoever makes
        the topology) is waited for, within a deadline."""
        ...


class ServiceRegistry(Protocol):
    """The services bucket as one instance uses it: its entry written (and refreshed), and withdrawn at a stop."""

    async def announce(self, instance: ServiceInstance) -> None: ...

    async def withdraw(self, instance: ServiceInstance) -> None: ...


class Link(Protocol):
    """A service's own connection, as its runtime minds it (the other ports are built on it): whether it is up,
    what of the topology is gone, its registry entry and $SRV.PING, and its close at a stop."""

    def connected(self) -> bool: ...

    def closed(self, exc: BaseException) -> bool:
        """Whether `exc` is a use of the connection after its close."""
        ...

    async def missing_parts(self) -> list[str]:
        """The streams, buckets and consumers of jetcron's topology not on the server."""
        ...

    async def registry(self) -> ServiceRegistry: ...

    async def answer_pings(self, instance: ServiceInstance, version: str) -> Endpoints:
        """Answer `$SRV.PING`, `$SRV.INFO` and `$SRV.STATS` as this instance until stopped."""
        ...

    async def close(self, *, drain: float | None, timeout: float) -> bool:
        """Drain for `drain` seconds (None: close at once), waiting at most `timeout` for the server; True if
        it answered the flush before the drain."""
        ...

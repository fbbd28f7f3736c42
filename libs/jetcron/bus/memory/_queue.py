"""The twins of ports.Message, ports.WorkQueue and ports.Consumers: a stream with one pull consumer."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from jetcron.bus.consume import work_loop
from jetcron.bus.ports import Durable, Handler


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

"""The one home of ack, nak and term: handlers return or raise an outcome; this loop maps it."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

import nats.errors
import structlog
from nats.js.api import Header
from nats.js.errors import NotFoundError

from jetcron.bus.handles import JetStream
from jetcron.bus.natspy import api_prefix, connection_of
from jetcron.bus.ports import Durable, Handler, Message, WorkQueue
from jetcron.bus.topology import ensure_durable
from jetcron.core.errors import JetcronError, Unavailable

log = structlog.get_logger("jetcron.consume")
PENDING = "Nats-Pending-Messages"  # on a 408/409: what the ended request still owed (nats-py has no name for it)


class Retry(JetcronError):
    """Handler outcome: leave the message for later (nak with a delay)."""

    def __init__(self, delay: float, why: str = "") -> None:
        self.delay = delay
        super().__init__(why or f"retry in {delay}s")


class Drop(JetcronError):
    """Handler outcome: the message can never be handled (bad payload): terminate it."""


class Hold(JetcronError):
    """Handler outcome: keep the message unacked in progress; the handler acks it later itself."""


async def settle(msg: Message, handler: Handler) -> None:
    """Run one message through a handler and ack, nak or term it accordingly."""
    try:
        await handler(msg)
    except Hold:
        return
    except Retry as r:
        await msg.nak(delay=r.delay)
        return
    except Drop as d:
        log.warning("message dropped", subject=msg.subject, reason=str(d))
        await msg.term()
        return
    except Unavailable as u:
        log.warning("storage unavailable; will redeliver", subject=msg.subject, error=str(u))
        await msg.nak(delay=1.0)
        return
    except asyncio.CancelledError:
        raise
    except Exception:
        log.exception("handler failed; will redeliver", subject=msg.subject)
        await msg.nak(delay=2.0)
        return
    await msg.ack()


class ConsumerGone(Unavailable):
    """The server refused a pull request: the consumer was deleted, nothing answers for it (503), or it cannot
    take the request. pull_loop waits a moment, makes the consumer again where it can, and asks again. In bus: it
    reads a status of the server's pull protocol, which nothing outside bus sees."""


class PullQueue:
    """A durable pull consumer as the queue port (ports.WorkQueue; its twin is memory.MemoryQueue).

    It keeps lingering pull requests open on one inbox instead of nats-py's `fetch`, which spent a request and a
    status message per batch and a task, a `wait_for` and a timer per message, and added a round trip to every idle
    hop. A message arrives in the subscription's callback and waits in a buffer; `fetch` hands the buffer over and
    asks for more only when the caller is ready for more, so no more than `batch` delivered messages wait unhandled
    in the process, as with `fetch(batch)`. The count asked for and not yet delivered is kept from each message and
    from the server's 408 and 409 statuses (their Nats-Pending-Messages header), as nats.go's `Consume` does. A
    request the server may have lost (a reconnect, heartbeats missed) is presumed gone and asked for again: asking
    twice costs at most a request left open."""

    EXPIRES = 30.0  # seconds a pull request lingers; each is renewed when its 408 comes back
    HEARTBEAT = 0.5  # the server says it still holds a request after this long idle
    MISSED = 1.5  # ...and after three beats without a word from it, the request is presumed lost (a node died)

    def __init__(self, js: JetStream, stream: str, durable: str) -> None:
        self._nc: Any = connection_of(js)
        self._next = f"{api_prefix(js)}.CONSUMER.MSG.NEXT.{stream}.{durable}"
        self._inbox = self._nc.new_inbox()
        self._sub: Any = None
        self._buffer: deque[Message] = deque()
        self._arrived = asyncio.Event()
        self._asked = 0  # messages asked for and not yet delivered
        self._batch = 1
        self._heard = time.monotonic()
        self._reconnects = self._nc.stats["reconnects"]
        self._refused: str | None = None

    @classmethod
    async def bind(cls, js: JetStream, stream: str, durable: str) -> PullQueue:
        """The existing durable `durable` on `stream` (pull_loop's `remake` makes it again when it is gone)."""
        queue = cls(js, stream, durable)
        queue._sub = await queue._nc.subscribe(queue._inbox, cb=queue._arrive)
        return queue

    async def _arrive(self, msg: Any) -> None:
        self._heard = time.monotonic()
        status = msg.headers.get(Header.STATUS) if msg.headers and not msg.data else None
        if status is None:
            self._asked = max(0, self._asked - 1)  # a request presumed lost may still deliver
            self._buffer.append(msg)
            self._arrived.set()
        elif status == "100":  # an idle heartbeat: the request is still held
            return
        elif (pending := msg.headers.get(PENDING)) is not None:
            # A request ended short (expired, or a leadership change): what it still owed will not come.
            self._asked = max(0, self._asked - int(pending))
            if not self._buffer and self._asked == 0:
                await self._ask()  # a caller may be waiting on an empty buffer: renew the request now
        elif status == "409" and msg.headers.get(Header.DESCRIPTION, "") == "Leadership Change":
            self._asked = 0
            await self._ask()
        else:
            self._asked = 0
            self._refused = f"{status} {msg.headers.get(Header.DESCRIPTION, '').strip()}".strip()
            self._arrived.set()

    async def _ask(self) -> None:
        want = self._batch - self._asked - len(self._buffer)
        if want <= 0 or (self._asked and want < self._batch // 2):
            return
        beat = min(self.HEARTBEAT, self.EXPIRES / 4)  # the server refuses a heartbeat over half the expiry
        request = f'{{"batch":{want},"expires":{int(self.EXPIRES * 1e9)},"idle_heartbeat":{int(beat * 1e9)}}}'
        self._asked += want
        try:
            await self._nc.publish(self._next, request.encode(), reply=self._inbox)
        except BaseException:
            self._asked -= want
            raise

    async def fetch(self, batch: int, timeout: float) -> list[Message]:
        """Up to `batch` messages; TimeoutError when none came within `timeout` seconds."""
        self._batch = batch
        reconnects = self._nc.stats["reconnects"]
        if reconnects != self._reconnects or (self._asked and time.monotonic() - self._heard > self.MISSED):
            self._reconnects, self._asked, self._heard = reconnects, 0, time.monotonic()
        await self._ask()
        if not self._buffer and self._refused is None:
            self._arrived.clear()
            try:
                await asyncio.wait_for(self._arrived.wait(), timeout)
            except TimeoutError:
                raise TimeoutError(f"no message within {timeout:g}s") from None
            await asyncio.sleep(0)  # the rest of a read that brought several messages: one batch, not one each
        if self._refused is not None:
            refused, self._refused = self._refused, None
            raise ConsumerGone(f"pull request refused: {refused}")
        if len(self._buffer) <= batch:
            taken = list(self._buffer)
            self._buffer.clear()
            return taken
        return [self._buffer.popleft() for _ in range(batch)]

    async def close(self) -> None:
        """Stop asking; what was delivered and not handed over goes back to the server at once (a nak), not
        after its ack wait."""
        if self._sub is not None:
            await self._sub.unsubscribe()
        while self._buffer:
            with contextlib.suppress(Exception):
                await self._buffer.popleft().nak()


async def work_loop(queue: WorkQueue, handler: Handler, *, batch: int = 256, concurrency: int = 64,
                    stop: asyncio.Event | None = None,
                    failed: Callable[[Exception], Awaitable[None]] | None = None) -> None:
    """Fetch batches from a work queue (the server's durable consumer, or the twin's) and settle each message;
    runs until `stop` is set. `failed`: what to do when a fetch fails (by default, wait half a second)."""
    gate = asyncio.Semaphore(concurrency)
    pending: set[asyncio.Task[Any]] = set()

    async def one(m: Message) -> None:
        async with gate:
            await settle(m, handler)

    while stop is None or not stop.is_set():
        try:
            msgs = await queue.fetch(batch, timeout=1.0)
        except TimeoutError:
            # nats-py's fetch can turn a cancel that lands during its wait into a timeout (3.11 wait_for):
            # a loop that took it for one would never end, and hold its process's exit for ever.
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise asyncio.CancelledError from None
            continue
        except Exception as exc:
            await (failed(exc) if failed is not None else asyncio.sleep(0.5))
            continue
        for m in msgs:
            await gate.acquire()
            gate.release()
            task = asyncio.create_task(one(m))
            pending.add(task)
            task.add_done_callback(pending.discard)
    if pending:
        await asyncio.gather(*pending, return_exceptions=True)


async def pull_loop(js: JetStream, stream: str, durable: str, handler: Handler, *,
                    batch: int = 256, concurrency: int = 64, stop: asyncio.Event | None = None,
                    remake: Callable[[], Awaitable[object]] | None = None) -> None:
    """work_loop over a durable pull consumer on the server.

    `remake`: makes the consumer again when the server says it is gone (its stream was deleted and made again
    by a core service's topology check); without it, fetches fail until someone else makes it."""
    queue = await PullQueue.bind(js, stream, durable)

    async def failed(exc: Exception) -> None:
        if not isinstance(exc, (nats.errors.ConnectionClosedError, nats.errors.ConnectionReconnectingError)):
            log.warning("fetch failed", stream=stream, error=str(exc))
            if remake is not None:
                await _remake_if_gone(js, stream, durable, remake)
        await asyncio.sleep(0.5)

    await work_loop(queue, handler, batch=batch, concurrency=concurrency, stop=stop, failed=failed)
    await queue.close()


class ServerConsumers:
    """ports.Consumers on JetStream: each durable consumer consumed by pull_loop."""

    def __init__(self, js: JetStream) -> None:
        self.js = js

    async def consume(self, stream: str, durable: str, handler: Handler, *, batch: int = 256,
                      concurrency: int = 64, stop: asyncio.Event | None = None,
                      remake: Callable[[], Awaitable[object]] | None = None) -> None:
        await pull_loop(self.js, stream, durable, handler, batch=batch, concurrency=concurrency, stop=stop,
                        remake=remake)

    async def ensure(self, stream: str, durable: Durable) -> str:
        return await ensure_durable(self.js, stream, durable)


async def _remake_if_gone(js: JetStream, stream: str, durable: str,
                          remake: Callable[[], Awaitable[object]]) -> None:
    try:
        await js.consumer_info(stream, durable)
        return
    except NotFoundError:
        pass
    except Exception:
        return  # the server does not answer: the next failed fetch asks again
    log.error("consumer gone: making it again", stream=stream, consumer=durable)
    try:
        await remake()
    except Exception as exc:
        log.warning("consumer not made again yet", stream=stream, consumer=durable, error=repr(exc))


async def ack_held(msg: Message) -> None:
    """Ack a message its handler held (Hold), once its work is done. Best effort: a lost ack is a redelivery,
    which the handlers' fencing and idempotency keys absorb."""
    with contextlib.suppress(Exception):
        await msg.ack()


async def touch(msg: Message) -> None:
    """Tell the server a held or slow message is still being worked on (its ack wait starts again)."""
    with contextlib.suppress(Exception):
        await msg.in_progress()

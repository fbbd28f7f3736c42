"""The one home of ack, nak and term: handlers return or raise an outcome; this loop maps it."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

import nats.errors
import structlog
from nats.js.errors import NotFoundError

from jetcron.bus.ports import Handler, JetStream, Message
from jetcron.core.errors import JetcronError, Unavailable

log = structlog.get_logger("jetcron.consume")


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


class PullQueue:
    """A durable pull consumer as the queue port (ports.WorkQueue; its twin is memory.MemoryQueue)."""

    def __init__(self, js: JetStream, sub: Any) -> None:
        self.js = js
        self._sub = sub

    @classmethod
    async def bind(cls, js: JetStream, stream: str, durable: str, subject: str | None = None) -> PullQueue:
        """The existing durable `durable` on `stream`; with `subject`, made for it when missing."""
        sub = await js.pull_subscribe_bind(durable=durable, stream=stream) if subject is None else \
            await js.pull_subscribe(subject, durable=durable, stream=stream)
        return cls(js, sub)

    async def fetch(self, batch: int, timeout: float) -> list[Message]:
        """Up to `batch` messages; TimeoutError when none came within `timeout` seconds."""
        try:
            return list(await self._sub.fetch(batch, timeout=timeout))
        except nats.errors.TimeoutError:
            raise TimeoutError(f"no message within {timeout:g}s") from None

    async def close(self) -> None:
        await self._sub.unsubscribe()


async def pull_loop(js: JetStream, stream: str, durable: str, handler: Handler, *,
                    batch: int = 256, concurrency: int = 64, stop: asyncio.Event | None = None,
                    subject: str | None = None, remake: Callable[[], Awaitable[object]] | None = None) -> None:
    """Fetch batches from a durable pull consumer and settle each message; runs until `stop` is set.

    `remake`: makes the consumer again when the server says it is gone (its stream was deleted and made again
    by a core service's topology check); without it, fetches fail until someone else makes it."""
    queue = await PullQueue.bind(js, stream, durable, subject)
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
        except (nats.errors.ConnectionClosedError, nats.errors.ConnectionReconnectingError):
            await asyncio.sleep(0.5)
            continue
        except Exception as exc:
            log.warning("fetch failed", stream=stream, error=str(exc))
            if remake is not None:
                await _remake_if_gone(js, stream, durable, remake)
            await asyncio.sleep(0.5)
            continue
        for m in msgs:
            await gate.acquire()
            gate.release()
            task = asyncio.create_task(one(m))
            pending.add(task)
            task.add_done_callback(pending.discard)
    if pending:
        await asyncio.gather(*pending, return_exceptions=True)
    await queue.close()


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

"""Core NATS request/reply and plain subscriptions, for services that answer or ask without JetStream: the
one place their errors (no responders, no answer in time) become jetcron's."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any

import nats.errors
from nats import micro
from nats.aio.subscription import Subscription
from nats.micro.service import Service

from jetcron.bus.handles import Connection, JetStream
from jetcron.bus.ports import Endpoint, Endpoints, Handler, Message, Request, Subscribed
from jetcron.core.errors import Unavailable

CANCELS = 3
"""Cancels a closing step is given before it is left to the loop's end (each followed by 0.1 s)."""


class NoAnswer(Unavailable):
    """Nobody answered a request: no responder on the subject, or none within the timeout."""

    def __init__(self, message: str, *, responders: bool) -> None:
        super().__init__(message)
        self.responders = responders
        """False: nobody listens on the subject at all (no service running); True: it did not answer in time."""


async def request(nc: Connection, subject: str, data: bytes, *, timeout: float,
                  headers: dict[str, str] | None = None) -> Message:
    """The reply to one request; NoAnswer (naming the subject and why) when none comes."""
    return await answered(nc.request(subject, data, timeout=timeout, headers=headers), subject, timeout)


async def answered(reply: Awaitable[Message], subject: str, timeout: float) -> Message:
    """A request's reply as it arrives; its failures to arrive as NoAnswer."""
    try:
        return await reply
    except nats.errors.NoRespondersError:
        raise NoAnswer(f"{subject}: no responders", responders=False) from None
    except (TimeoutError, nats.errors.TimeoutError):
        raise NoAnswer(f"{subject}: no answer within {timeout:g}s", responders=True) from None


async def serve(nc: Connection, subject: str, handler: Handler, *, queue: str = "",
                flush: bool = False) -> Subscription:
    """Call `handler` with every message on `subject` (one queue group member when `queue` is given);
    `flush`: return only once the server has the subscription (a request sent after "ready" finds it)."""
    sub = await nc.subscribe(subject, queue=queue, cb=handler)
    if flush:
        await nc.flush()
    return sub


async def notify(nc: Connection, subject: str, data: bytes) -> None:
    """A fire-and-forget core NATS message (control messages: a lost one is covered by the lease)."""
    await nc.publish(subject, data)


async def replies(nc: Connection, subject: str, *, window: float, enough: Callable[[list[bytes]], bool]) -> list[bytes]:
    """Every reply to one request on `subject` that comes within `window` seconds, or until `enough` says so
    (a scatter-gather, as `$SRV.PING` is answered by every service instance)."""
    got: list[bytes] = []
    done = asyncio.Event()

    async def on_reply(msg: Message) -> None:
        got.append(msg.data)
        if enough(got):
            done.set()

    inbox = nc.new_inbox()
    sub = await nc.subscribe(inbox, cb=on_reply)
    try:
        await nc.publish(subject, b"", reply=inbox)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(done.wait(), window)
    finally:
        await sub.unsubscribe()
    return got


async def flush(nc: Connection) -> None:
    """Wait until the server has processed everything sent on this connection so far."""
    await nc.flush()


async def close(nc: Connection, *, drain: float | None = 2.0, timeout: float = 1.0) -> bool:
    """Drain what is buffered, briefly (`drain` seconds): a server that is gone gets a close, not a wait.
    `drain=None`: close at once (a client with nothing in flight), waiting at most `timeout` seconds (a frozen
    server never answers the flush a close ends with). True if the server answered the flush that comes before
    the drain (False with `drain=None`: none was asked)."""
    # The server must answer a flush first: nats-py's drain, cut short, leaves a failed future of its own
    # unread (a traceback in the log at exit).
    answered = False
    if drain is not None:
        answered = await _within(nc.flush(timeout=max(1, round(drain / 2))), drain / 2)
        if answered and await _within(nc.drain(), drain / 2):
            return True
    await _within(nc.close(), timeout)
    return answered


async def _within(step: Coroutine[Any, Any, None], limit: float) -> bool:
    """Run `step` for at most `limit` seconds; True if it ended without raising. Not asyncio.wait_for: nats-py's
    drain takes the first cancel as its own timeout and goes on to flush, for its 10 s, to a server that does not
    answer, and wait_for waits for the cancelled task to end. Here it is cancelled again until it ends."""
    task = asyncio.ensure_future(step)
    await asyncio.wait({task}, timeout=limit)
    for _ in range(CANCELS):
        if task.done():
            break
        task.cancel()
        await asyncio.wait({task}, timeout=0.1)
    return task.done() and not task.cancelled() and task.exception() is None


def is_connected(nc: Connection) -> bool:
    return bool(nc.is_connected)


def jetstream(nc: Connection, *, timeout: float) -> JetStream:
    """A JetStream context whose requests wait at most `timeout` seconds for the server."""
    return nc.jetstream(timeout=timeout)


async def add_endpoints(nc: Connection, *, name: str, version: str, description: str, queue: str,
                        endpoints: Sequence[Endpoint]) -> Service:
    """A nats.micro service in a queue group, serving each endpoint; it answers `$SRV.*` for them (request
    counts, errors, latency) too. Returns once the server has every endpoint's subscription."""
    service = await micro.add_service(nc, name=name, version=version, description=description, queue_group=queue)
    for endpoint, subject, handler in endpoints:
        await service.add_endpoint(name=endpoint, subject=subject, handler=handler)
    await nc.flush()
    return service


class NatsRpc:
    """ports.Rpc on a NATS connection."""

    def __init__(self, nc: Connection) -> None:
        self.nc = nc

    async def request(self, subject: str, data: bytes, *, timeout: float,
                      headers: dict[str, str] | None = None) -> Request:
        return await request(self.nc, subject, data, timeout=timeout, headers=headers)

    async def serve(self, subject: str, handler: Handler, *, queue: str = "", flush: bool = False) -> Subscribed:
        return await serve(self.nc, subject, handler, queue=queue, flush=flush)

    async def notify(self, subject: str, data: bytes) -> None:
        await notify(self.nc, subject, data)

    async def flush(self) -> None:
        await flush(self.nc)

    @property
    def connected(self) -> bool:
        return is_connected(self.nc)

    async def endpoints(self, *, name: str, version: str, description: str, queue: str,
                        endpoints: Sequence[Endpoint]) -> Endpoints:
        return await add_endpoints(self.nc, name=name, version=version, description=description, queue=queue,
                                   endpoints=endpoints)

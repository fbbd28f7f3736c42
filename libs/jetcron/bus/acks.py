"""Publishing to a stream and waiting for its ack, with less work per message than nats-py's `js.publish`.

Every write jetcron makes (a KV create or compare-and-set, a command, a report, a lease) is a JetStream publish
that waits for the server's ack. nats-py does each as a request: a NUID plus `secrets.token_hex` (a read of
/dev/urandom) for the reply token, a future with a done-callback, an `asyncio.wait_for`, and a JSON parse into
dataclasses, which weighs on a service making several writes per run (docs/benchmarks-history.md). Here each
connection has one reply subscription (`<inbox>.<id>.*`), tokens are a counter, the timeout is one timer
handle, and the ack is decoded by msgspec. Errors are nats-py's (`APIError`, `NoStreamResponseError`,
`TimeoutError`), so `kv.translate` reads them as before.
"""

from __future__ import annotations

import asyncio
import itertools
import weakref
from typing import Any

import msgspec
import nats.errors
import nats.js.api
import nats.js.errors as jse
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js import JetStreamContext

from jetcron.bus.natspy import connection_of, request_timeout

NO_RESPONDERS = "503"


class _Error(msgspec.Struct):
    code: int = 0
    err_code: int = 0
    description: str = ""


class _Ack(msgspec.Struct):
    seq: int = 0
    error: _Error | None = None


_decode_ack = msgspec.json.Decoder(_Ack).decode


class Acks:
    """The acks awaited on one connection."""

    def __init__(self, nc: Client) -> None:
        self.nc = nc
        self.prefix = ""
        self.waiting: dict[str, asyncio.Future[Msg]] = {}
        self.tokens = itertools.count()
        self._ready: asyncio.Lock | None = None

    async def _subscribe(self) -> None:
        if self._ready is None:
            self._ready = asyncio.Lock()
        async with self._ready:
            if self.prefix:
                return
            prefix = f"{self.nc.new_inbox()}."
            await self.nc.subscribe(prefix + "*", cb=self._answer)
            self.prefix = prefix

    async def _answer(self, msg: Msg) -> None:
        future = self.waiting.pop(msg.subject[len(self.prefix):], None)
        if future is not None and not future.done():
            future.set_result(msg)

    async def publish(self, subject: str, payload: bytes, headers: dict[str, str] | None, timeout: float) -> int:
        """Publish, wait for the stream's ack, return the stream sequence it stored the message at."""
        if not self.prefix:
            await self._subscribe()
        token = str(next(self.tokens))
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Msg] = loop.create_future()
        self.waiting[token] = future
        timer = loop.call_later(timeout, _expire, future)
        try:
            await self.nc.publish(subject, payload, reply=self.prefix + token, headers=headers)
            msg = await future
        finally:
            timer.cancel()
            self.waiting.pop(token, None)
        if not msg.data and msg.headers and msg.headers.get(nats.js.api.Header.STATUS) == NO_RESPONDERS:
            raise jse.NoStreamResponseError
        ack = _decode_ack(msg.data)
        if ack.error is not None:
            raise jse.APIError(code=ack.error.code, err_code=ack.error.err_code, description=ack.error.description)
        return ack.seq


def _expire(future: asyncio.Future[Msg]) -> None:
    if not future.done():
        future.set_exception(nats.errors.TimeoutError())


_ACKS: weakref.WeakKeyDictionary[Client, Acks] = weakref.WeakKeyDictionary()


async def publish_acked(js: JetStreamContext, subject: str, payload: bytes,
                        headers: dict[str, str] | None = None) -> int:
    """`js.publish(...).seq`, leaner (above); the timeout is the JetStream context's. Any other handle with a
    `publish` (the unit tests' stand-ins for JetStream) is asked through it."""
    if not isinstance(js, JetStreamContext):
        ack: Any = await js.publish(subject, payload, headers=headers)
        return int(ack.seq)
    nc = connection_of(js)
    acks = _ACKS.get(nc)
    if acks is None:
        acks = _ACKS[nc] = Acks(nc)
    return await acks.publish(subject, payload, headers, request_timeout(js))

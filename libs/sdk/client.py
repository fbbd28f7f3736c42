"""The SDK client: every API verb over NATS request/reply, errors raised as ApiError with the field named."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Iterator
from typing import Any

import msgspec
import nats
import nats.errors
from nats.aio.client import Client as Nats

from jetcron.bus.connect import Identity
from jetcron.bus.logs import read_chunks
from jetcron.core.errors import JetcronError
from jetcron.core.models import RunState
from jetcron.telemetry.tracing import inject_headers
from jetcron.wire import subjects as s
from jetcron.wire.api import ErrorBody

DEFAULT_URL = "nats://127.0.0.1:4222"


class ApiError(JetcronError):
    """An error the API answered with; `code` is invalid, not_found, conflict, unavailable, ..."""

    def __init__(self, body: ErrorBody) -> None:
        self.code = body.code
        self.field = body.field
        self.value = body.value
        self.retryable = body.retryable
        super().__init__(body.message)


class _Envelope(msgspec.Struct):
    ok: bool
    result: Any = None
    error: ErrorBody | None = None


class Client:
    def __init__(self, nc: Nats, timeout: float = 10.0) -> None:
        self.nc = nc
        self.timeout = timeout

    @classmethod
    async def connect(cls, url: str | None = None, timeout: float = 10.0, *, identity: Identity | None = None) -> Client:
        url = url or os.environ.get("JETCRON_NATS_URL", DEFAULT_URL)
        nc = await nats.connect(servers=url.split(","), name="jetcron-client", connect_timeout=3,
                                max_reconnect_attempts=2, allow_reconnect=True, **(identity or Identity()).options())
        return cls(nc, timeout)

    async def close(self) -> None:
        await self.nc.close()

    async def call(self, verb: str, payload: dict[str, Any] | None = None) -> Any:
        data = msgspec.json.encode(payload or {})
        try:
            # The caller's own trace, if it has one, continues into the api and every run it starts.
            reply = await self.nc.request(s.api_subject(verb), data, timeout=self.timeout,
                                          headers=inject_headers({}) or None)
        except nats.errors.NoRespondersError:
            raise ApiError(ErrorBody(code="unavailable", retryable=True,
                                     message="no api service is answering (is `jetcron up` running?)")) from None
        except (TimeoutError, nats.errors.TimeoutError):
            raise ApiError(ErrorBody(code="unavailable", retryable=True,
                                     message=f"api did not answer {verb} within {self.timeout}s")) from None
        envelope = msgspec.json.decode(reply.data, type=_Envelope)
        if not envelope.ok:
            raise ApiError(envelope.error or ErrorBody(code="internal", message="error without detail"))
        return envelope.result

    async def follow_logs(self, run_id: str) -> AsyncIterator[bytes]:
        """A run's output as it is written, across its attempts, until the run is terminal and all is read."""

        async def ended() -> bool:
            try:
                run = await self.call("runs.get", {"run_id": run_id})
            except ApiError as exc:
                if exc.code == "not_found":
                    return True
                if exc.retryable:
                    return False
                raise
            return RunState(run["state"]).terminal

        async for _stream, chunk, end in read_chunks(self.nc.jetstream(), run_id, follow=True, until=ended):
            if not end:
                yield chunk


class SyncClient:
    """The same verbs for scripts and the CLI, on a private event loop."""

    def __init__(self, url: str | None = None, timeout: float = 10.0, *, identity: Identity | None = None) -> None:
        self.loop = asyncio.new_event_loop()
        self.client = self.loop.run_until_complete(Client.connect(url, timeout, identity=identity))

    def call(self, verb: str, payload: dict[str, Any] | None = None) -> Any:
        return self.loop.run_until_complete(self.client.call(verb, payload))

    def follow_logs(self, run_id: str) -> Iterator[bytes]:
        """Each chunk as it arrives (live), stepping the async stream on the private loop."""
        chunks = self.client.follow_logs(run_id)
        try:
            while True:
                try:
                    yield self.loop.run_until_complete(anext(chunks))
                except StopAsyncIteration:
                    return
        finally:
            self.loop.run_until_complete(chunks.aclose())  # type: ignore[attr-defined]

    def close(self) -> None:
        self.loop.run_until_complete(self.client.close())
        self.loop.close()

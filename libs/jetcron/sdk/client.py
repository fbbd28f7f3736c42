"""The SDK client: every API verb over NATS request/reply, errors raised as ApiError with the field named."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import msgspec

from jetcron.bus.caller import Denials, ask, connect_client
from jetcron.bus.connect import Identity
from jetcron.bus.handles import Connection
from jetcron.bus.logs import read_chunks
from jetcron.bus.ports import Rpc
from jetcron.bus.rpc import NatsRpc, NoAnswer, jetstream
from jetcron.bus.rpc import close as close_connection
from jetcron.bus.streams import ServerStreams
from jetcron.core.models import RunState
from jetcron.sdk.errors import ApiError, api_error
from jetcron.sdk.verbs import Blocking, Verbs
from jetcron.wire import subjects as s
from jetcron.wire.api import ErrorBody

DEFAULT_URL = "nats://127.0.0.1:4222"
LOG_POLL_SECONDS = 0.5




def _trace_headers() -> dict[str, str] | None:
    """The caller's trace context for the request: none where the process never imported OpenTelemetry, which
    holds every span a caller could be in (a CLI call need not pay a tenth of a second to import it for nothing)."""
    if "opentelemetry" not in sys.modules:
        return None
    from jetcron.telemetry.tracing import inject_headers

    return inject_headers({}) or None

class _Envelope(msgspec.Struct):
    ok: bool
    result: Any = None
    error: ErrorBody | None = None


class Client(Verbs):
    """Every API verb: typed (`client.jobs.create(spec) -> JobRecord`, `client.runs.list(job=...) ->
    Page[Run]`; errors as sdk.errors classes), or by name with `call(verb, payload)`."""

    def __init__(self, nc: Connection | None = None, timeout: float = 10.0, *, tenant: str | None = None,
                 denials: Denials | None = None, rpc: Rpc | None = None) -> None:
        """Over a connection of its own (`nc`), or over a service's request port (`rpc`: the gateway's calls
        share its connection, and it closes nothing)."""
        super().__init__(self)
        if rpc is None:
            if nc is None:
                raise TypeError("Client needs a connection (nc) or a request port (rpc)")
            rpc = NatsRpc(nc)
        self.nc = nc
        self.rpc = rpc
        self.timeout = timeout
        self.tenant = tenant
        """The tenant every call is made for; None: the admin subject (an admin credential, or no auth)."""
        self._denials = denials or Denials()

    @classmethod
    async def connect(cls, url: str | None = None, timeout: float = 10.0, *,
                      identity: Identity | None = None) -> Client:
        url = url or os.environ.get("JETCRON_NATS_URL", DEFAULT_URL)
        identity = identity or Identity(creds=os.environ.get("JETCRON_NATS_CREDS") or None,
                                        tls_ca=os.environ.get("JETCRON_NATS_TLS_CA") or None)
        nc, denials = await connect_client(url, identity)
        return cls(nc, timeout, tenant=identity.tenant, denials=denials)

    async def close(self) -> None:
        if self.nc is not None:
            await close_connection(self.nc, drain=None)

    async def call(self, verb: str, payload: dict[str, Any] | None = None) -> Any:
        data = msgspec.json.encode(payload or {})
        subject = s.api_subject(verb, self.tenant)
        try:
            # The caller's own trace, if it has one, continues into the api and every run it starts.
            reply = await ask(self.rpc, self._denials, subject, data, timeout=self.timeout,
                              headers=_trace_headers())
        except NoAnswer as exc:
            message = f"api did not answer {verb} within {self.timeout}s" if exc.responders else \
                "no api service is answering (is `jetcron up` running?)"
            raise api_error(ErrorBody(code="unavailable", retryable=True, message=message)) from None
        if reply is None:
            raise api_error(ErrorBody(code="forbidden", message=f"{verb}: the server refused it to this credential "
                                     f"({self._denials.last})"))
        envelope = msgspec.json.decode(reply.data, type=_Envelope)
        if not envelope.ok:
            raise api_error(envelope.error or ErrorBody(code="internal", message="error without detail"))
        return envelope.result

    async def follow_logs(self, run_id: str, *, through_api: bool = False) -> AsyncIterator[bytes]:
        """A run's output as it is written, across its attempts, until the run is terminal and all is read.
        `through_api`: polled through the API even for the admin (a credential that reads no stream)."""

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

        if self.tenant is not None or through_api or self.nc is None:
            # A tenant's credential reads no stream: its run's output comes through the API, polled.
            async for chunk in self._poll_logs(run_id, ended):
                yield chunk
            return
        js = jetstream(self.nc, timeout=5)
        async for _stream, chunk, end, _seq in read_chunks(ServerStreams(js), run_id, follow=True, until=ended):
            if not end:
                yield chunk

    async def _poll_logs(self, run_id: str, ended: Callable[[], Awaitable[bool]]) -> AsyncIterator[bytes]:
        # Each read resumes after the stream position the last one reached, so the API reads only what is new
        # (never the whole output again); it reads on at once while reads bring more (one stops at runs.logs' byte
        # limit), and waits only when one brought nothing.
        after = 0
        while True:
            done = await ended()
            logs = await self.call("runs.logs", {"run_id": run_id, "after": after})
            if logs["output"]:
                yield logs["output"].encode()
            position = int(logs.get("position") or 0)
            if position <= after:
                if done:
                    return
                await asyncio.sleep(LOG_POLL_SECONDS)
            after = max(after, position)


class SyncClient:
    """The same verbs for scripts and the CLI, on a private event loop: `SyncClient().jobs.list()`."""

    def __init__(self, url: str | None = None, timeout: float = 10.0, *, identity: Identity | None = None) -> None:
        self.loop = asyncio.new_event_loop()
        self.client = self.loop.run_until_complete(Client.connect(url, timeout, identity=identity))
        run = self.loop.run_until_complete
        c = self.client
        self.jobs, self.runs, self.agents, self.cluster, self.dlq = (
            Blocking(g, run) for g in (c.jobs, c.runs, c.agents, c.cluster, c.dlq))
        self.tenants, self.secrets, self.submissions, self.tokens, self.notifications = (
            Blocking(g, run) for g in (c.tenants, c.secrets, c.submissions, c.tokens, c.notifications))
        self.calendars = Blocking(c.calendars, run)

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

"""The SDK client: every API verb over NATS request/reply, errors raised as ApiError with the field named."""

from __future__ import annotations

import asyncio
import os
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import msgspec
import nats
import nats.errors
from nats.aio.client import Client as Nats
from nats.aio.msg import Msg

from jetcron.bus.connect import Identity
from jetcron.bus.logs import read_chunks
from jetcron.core.errors import Unauthorized, Unavailable, Untrusted
from jetcron.core.models import RunState
from jetcron.sdk.errors import ApiError, api_error
from jetcron.sdk.verbs import Blocking, Verbs
from jetcron.telemetry.tracing import inject_headers
from jetcron.wire import subjects as s
from jetcron.wire.api import ErrorBody

DEFAULT_URL = "nats://127.0.0.1:4222"
LOG_POLL_SECONDS = 0.5
CONNECT_SECONDS = 8.0


class _Envelope(msgspec.Struct):
    ok: bool
    result: Any = None
    error: ErrorBody | None = None


class _Denials:
    """Permission errors the server sent this connection: a request to a subject the credential may not use
    gets no answer, only this asynchronous error, so a call waits for either."""

    def __init__(self) -> None:
        self.last: str | None = None
        self.seen = asyncio.Event()
        self.tls: str | None = None
        """A certificate the client could not verify while connecting (reported only here after retries)."""

    async def on_error(self, exc: Exception) -> None:
        text = str(exc)
        if isinstance(exc, ssl.SSLError):
            self.tls = str(exc.reason or exc)
        if "permissions violation" in text.lower() or "authorization violation" in text.lower():
            self.last = text
            self.seen.set()


def _refusal(url: str, identity: Identity, exc: BaseException, denials: _Denials) -> Exception:
    """What a failed connect means for the caller: an untrusted server, a refused credential, or unreachable."""
    if isinstance(exc, ssl.SSLError) or denials.tls:
        reason = denials.tls or str(getattr(exc, "reason", "") or exc)
        return Untrusted(f"cannot verify the TLS certificate of NATS at {url} ({reason}): give the CA that signed "
                         "it with --tls-ca or JETCRON_NATS_TLS_CA")
    # A refused credential may surface as the refusal itself or, after the client's own retries, as "no servers
    # available" with the refusal reported to the error callback.
    if "authorization violation" in f"{exc} {denials.last}".lower():
        how = f"credentials {identity.creds}" if identity.creds else "no credentials"
        return Unauthorized(f"NATS at {url} refused the connection ({how}): give a valid credentials file with "
                            "--creds or JETCRON_NATS_CREDS")
    if isinstance(exc, TimeoutError):
        return Unavailable(f"NATS at {url} did not answer within {CONNECT_SECONDS:g}s")
    return exc if isinstance(exc, Exception) else Unavailable(str(exc))


class Client(Verbs):
    """Every API verb: typed (`client.jobs.create(spec) -> JobRecord`, `client.runs.list(job=...) ->
    Page[Run]`; errors as sdk.errors classes), or by name with `call(verb, payload)`."""

    def __init__(self, nc: Nats, timeout: float = 10.0, *, tenant: str | None = None,
                 denials: _Denials | None = None) -> None:
        super().__init__(self)
        self.nc = nc
        self.timeout = timeout
        self.tenant = tenant
        """The tenant every call is made for; None: the admin subject (an admin credential, or no auth)."""
        self._denials = denials or _Denials()

    @classmethod
    async def connect(cls, url: str | None = None, timeout: float = 10.0, *,
                      identity: Identity | None = None) -> Client:
        url = url or os.environ.get("JETCRON_NATS_URL", DEFAULT_URL)
        identity = identity or Identity(creds=os.environ.get("JETCRON_NATS_CREDS") or None,
                                        tls_ca=os.environ.get("JETCRON_NATS_TLS_CA") or None)
        denials = _Denials()
        try:
            # Bounded: nats-py keeps retrying a TLS handshake that fails verification, reporting it only to the
            # error callback; a client must get a named error, not a hang.
            nc = await asyncio.wait_for(nats.connect(
                servers=url.split(","), name="jetcron-client", connect_timeout=3, max_reconnect_attempts=2,
                allow_reconnect=True, error_cb=denials.on_error, **identity.options()), timeout=CONNECT_SECONDS)
        except (ssl.SSLError, nats.errors.Error, TimeoutError) as exc:
            raise _refusal(url, identity, exc, denials) from None
        return cls(nc, timeout, tenant=identity.tenant, denials=denials)

    async def close(self) -> None:
        await self.nc.close()

    async def call(self, verb: str, payload: dict[str, Any] | None = None) -> Any:
        data = msgspec.json.encode(payload or {})
        subject = s.api_subject(verb, self.tenant)
        try:
            # The caller's own trace, if it has one, continues into the api and every run it starts.
            reply = await self._request(subject, data)
        except nats.errors.NoRespondersError:
            raise api_error(ErrorBody(code="unavailable", retryable=True,
                                     message="no api service is answering (is `jetcron up` running?)")) from None
        except (TimeoutError, nats.errors.TimeoutError):
            raise api_error(ErrorBody(code="unavailable", retryable=True,
                                     message=f"api did not answer {verb} within {self.timeout}s")) from None
        if reply is None:
            raise api_error(ErrorBody(code="forbidden", message=f"{verb}: the server refused it to this credential "
                                     f"({self._denials.last})"))
        envelope = msgspec.json.decode(reply.data, type=_Envelope)
        if not envelope.ok:
            raise api_error(envelope.error or ErrorBody(code="internal", message="error without detail"))
        return envelope.result

    async def _request(self, subject: str, data: bytes) -> Msg | None:
        """The reply, or None when the server refused the subject to this credential (no reply would come)."""
        self._denials.seen.clear()
        request = asyncio.ensure_future(self.nc.request(subject, data, timeout=self.timeout,
                                                        headers=inject_headers({}) or None))
        denied = asyncio.ensure_future(self._denials.seen.wait())
        try:
            await asyncio.wait({request, denied}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            denied.cancel()
        if request.done():
            return request.result()
        if subject in (self._denials.last or ""):
            request.cancel()
            return None
        return await request

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

        if self.tenant is not None or through_api:
            # A tenant's credential reads no stream: its run's output comes through the API, polled.
            async for chunk in self._poll_logs(run_id, ended):
                yield chunk
            return
        async for _stream, chunk, end in read_chunks(self.nc.jetstream(), run_id, follow=True, until=ended):
            if not end:
                yield chunk

    async def _poll_logs(self, run_id: str, ended: Callable[[], Awaitable[bool]]) -> AsyncIterator[bytes]:
        sent = 0
        while True:
            done = await ended()
            out = (await self.call("runs.logs", {"run_id": run_id}))["output"].encode()
            if len(out) > sent:
                yield out[sent:]
                sent = len(out)
            if done:
                return
            await asyncio.sleep(LOG_POLL_SECONDS)


class SyncClient:
    """The same verbs for scripts and the CLI, on a private event loop: `SyncClient().jobs.list()`."""

    def __init__(self, url: str | None = None, timeout: float = 10.0, *, identity: Identity | None = None) -> None:
        self.loop = asyncio.new_event_loop()
        self.client = self.loop.run_until_complete(Client.connect(url, timeout, identity=identity))
        run = self.loop.run_until_complete
        c = self.client
        self.jobs, self.runs, self.agents, self.dlq = (Blocking(g, run) for g in (c.jobs, c.runs, c.agents, c.dlq))
        self.tenants, self.secrets, self.submissions, self.tokens, self.notifications = (
            Blocking(g, run) for g in (c.tenants, c.secrets, c.submissions, c.tokens, c.notifications))

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

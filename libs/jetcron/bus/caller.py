"""A client's connection to the api (the SDK, the CLI, the gateway): connect with a named reason when refused,
and requests that notice a permission denial instead of waiting out their timeout."""

from __future__ import annotations

import asyncio
import ipaddress
import ssl
import urllib.parse

import nats
import nats.errors

from jetcron.bus.connect import Identity
from jetcron.bus.handles import Connection
from jetcron.bus.ports import Request, Rpc
from jetcron.core.errors import Unauthorized, Unavailable, Untrusted

CONNECT_SECONDS = 8.0
PROBE_SECONDS = 1.0
"""How long a loopback server may take to accept a TCP connection before the client's own connect is left to try."""


class Denials:
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


def refusal(url: str, identity: Identity, exc: BaseException, denials: Denials) -> Exception:
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


async def connect_client(url: str, identity: Identity, *, name: str = "jetcron-client") -> tuple[Connection, Denials]:
    """A connection that gives up after a couple of reconnects (a client, not a service); a refusal is raised
    as Untrusted, Unauthorized or Unavailable, saying what to change."""
    denials = Denials()
    if await nothing_listens(url):
        raise Unavailable(f"NATS at {url} refused the connection: nothing listens there")
    try:
        # Bounded: nats-py keeps retrying a TLS handshake that fails verification, reporting it only to the
        # error callback; a client must get a named error, not a hang.
        nc = await asyncio.wait_for(nats.connect(
            servers=url.split(","), name=name, connect_timeout=3, max_reconnect_attempts=2,
            allow_reconnect=True, error_cb=denials.on_error, **identity.options()), timeout=CONNECT_SECONDS)
    except (ssl.SSLError, nats.errors.Error, TimeoutError) as exc:
        raise refusal(url, identity, exc, denials) from None
    return nc, denials


def is_loopback(url: str) -> bool:
    """Whether every server of `url` (comma-separated) is on this machine."""
    for part in url.split(","):
        host = urllib.parse.urlsplit(part.strip()).hostname or ""
        try:
            if not ipaddress.ip_address(host).is_loopback:
                return False
        except ValueError:
            if host != "localhost":
                return False
    return True


async def nothing_listens(url: str) -> bool:
    """Whether every server of a loopback `url` refuses a TCP connection. nats-py retries a refused server seconds
    apart before it gives up; on this machine a refusal is final at once (no server is starting across a network),
    so the caller hears it at once. False for any other URL, and when a server accepts or the probe is slow."""
    if not is_loopback(url):
        return False
    for part in url.split(","):
        split = urllib.parse.urlsplit(part.strip())
        try:
            _, writer = await asyncio.wait_for(asyncio.open_connection(split.hostname, split.port or 4222),
                                               timeout=PROBE_SECONDS)
        except ConnectionRefusedError:
            continue
        except (OSError, TimeoutError):
            return False
        writer.close()
        return False
    return True


async def ask(rpc: Rpc, denials: Denials, subject: str, data: bytes, *, timeout: float,
              headers: dict[str, str] | None = None) -> Request | None:
    """The reply, or None when the server refused the subject to this credential (no reply would come);
    NoAnswer when nobody answered."""
    denials.seen.clear()
    request = asyncio.ensure_future(rpc.request(subject, data, timeout=timeout, headers=headers))
    denied = asyncio.ensure_future(denials.seen.wait())
    try:
        await asyncio.wait({request, denied}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        denied.cancel()
    if not request.done() and subject in (denials.last or ""):
        request.cancel()
        return None
    return await request

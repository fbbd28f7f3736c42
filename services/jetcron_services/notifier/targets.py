"""Sending one notice to one target: a webhook (signed JSON POST), a NATS subject (JetStream), or an email.

Each send answers a DeliveryAttempt and never raises for the receiver's faults: a refused connection, a 500
or a timeout is a failed try the caller records and schedules again.

A webhook's host is resolved once per try, every address it resolves to is judged by the address it reaches
(jetcron.core.lifecycle.notify.address_allowed), and the connection goes to a checked address itself: the URL sent to
httpx names the address, so nothing resolves the name again between the check and the connection, and a name cannot
answer a public address to the check and a private one to the connection. The request still names the host: `Host` is
the URL's, and over TLS the host name is sent as SNI and the certificate verified for it (httpcore passes the
`sni_hostname` extension to the handshake as server_hostname, with hostname checking on), as when the name itself is
connected to. A tenant sees a failed try only as a generic reason (no address, no port); the detail goes to this
service's log.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import smtplib
import socket
import ssl
import time
from collections.abc import AsyncGenerator
from email.message import EmailMessage
from pathlib import Path
from typing import Any, cast
from urllib.parse import urlsplit

import httpx
import structlog

from jetcron.bus.ports import Publisher, Streams
from jetcron.config import Settings
from jetcron.core.clock import Clock
from jetcron.core.errors import Forbidden, JetcronError, NotFound
from jetcron.core.lifecycle.notify import (
    DELIVERY_HEADER,
    EVENT_HEADER,
    SIGNATURE_HEADER,
    DeliveryAttempt,
    Notice,
    address_allowed,
    sign,
)
from jetcron.core.models import NotifyRule
from jetcron.ops.secrets import Secrets
from jetcron.telemetry import metrics
from jetcron.wire import subjects as s
from jetcron.wire.codec import encode

USER_AGENT = "jetcron-notifier/0.1"
ANSWER_PREFIX = 4096
"""Bytes of a receiver's answer read at most: its status decides the try, and a body that never ends must neither
fill the notifier's memory nor hold the try."""
REFUSED = "refused: not a public address"
CONNECTION_FAILED = "connection failed"
TLS_FAILED = "TLS handshake failed (no certificate valid for the host?)"
NOT_HTTP = "the answer was not HTTP"
NO_SUCH_HOST = "the host name does not resolve"


def describe(rule: NotifyRule, tenant: str) -> str:
    """The target as a delivery record shows it: a webhook by scheme, host and port only."""
    if rule.webhook is not None:
        parts = urlsplit(rule.webhook)
        port = f":{parts.port}" if parts.port else ""
        return f"webhook {parts.scheme}://{parts.hostname}{port}"
    if rule.subject is not None:
        return f"subject {s.notify_subject(tenant, rule.subject)}"
    return f"email {rule.email}"


def kind(rule: NotifyRule) -> str:
    return "webhook" if rule.webhook is not None else "subject" if rule.subject is not None else "email"


class Unsafe(Forbidden):
    """The webhook's host resolves to an address the operator has not allowed. In the notifier: the address is
    checked as each delivery is sent, where the name is resolved. Its message names the addresses, for the
    service's log only: the tenant is told REFUSED."""


class Targets:
    def __init__(self, settings: Settings, publisher: Publisher, streams: Streams, clock: Clock,
                 log: structlog.stdlib.BoundLogger) -> None:
        self.settings = settings
        self.publisher = publisher
        self.clock = clock
        self.log = log
        self.secrets = Secrets(publisher, streams, settings.secrets_key_file)
        self.tls: ssl.SSLContext = httpx.create_ssl_context(trust_env=False)
        """httpx's own (certifi's CAs, hostname checking on), made once: loading the CAs is the costly part of a
        client, and each try makes one. The tests put their own CA here."""
        self.in_flight: dict[str, int] = {}
        """Webhook tries in flight per host and port, and per tenant; an entry goes when its last try ends."""
        self.sending = asyncio.Semaphore(settings.notify_concurrency)

    async def close(self) -> None:
        """Nothing outlives a try (each has its own connection); kept for the service's orderly stop."""

    async def send(self, rule: NotifyRule, notice: Notice, delivery_id: str) -> DeliveryAttempt | None:
        """One try; None when the rule's webhook host already has notify_per_target tries in flight from this
        replica, or its tenant notify_per_tenant: nothing was tried, and the caller asks again shortly. Waiting
        here instead would hold one of the replica's places for as long as the slow host holds its own, and enough
        deliveries to one host (or to one tenant's many hosts) would hold them all."""
        if rule.webhook is None:
            return await self._try(rule, notice, delivery_id)
        holds = ((f"host {_host_and_port(rule.webhook)}", self.settings.notify_per_target),
                 (f"tenant {notice.tenant}", self.settings.notify_per_tenant))
        if any(self.in_flight.get(who, 0) >= cap for who, cap in holds):
            return None
        for who, _ in holds:
            self.in_flight[who] = self.in_flight.get(who, 0) + 1
        try:
            async with self.sending:
                return await self._try(rule, notice, delivery_id)
        finally:
            for who, _ in holds:
                left = self.in_flight[who] - 1
                if left:
                    self.in_flight[who] = left
                else:
                    del self.in_flight[who]

    async def _try(self, rule: NotifyRule, notice: Notice, delivery_id: str) -> DeliveryAttempt:
        started, at = time.monotonic(), self.clock.now()
        try:
            if rule.webhook is not None:
                status, error = await self._webhook(rule, notice, delivery_id)
            elif rule.subject is not None:
                await self.publisher.publish(s.notify_subject(notice.tenant, rule.subject), notice,
                                             msg_id=delivery_id,
                                             headers={EVENT_HEADER: notice.event.value, DELIVERY_HEADER: delivery_id})
                status, error = None, ""
            else:
                status, error = None, await asyncio.wait_for(asyncio.to_thread(self._email, rule, notice),
                                                             timeout=self.settings.notify_timeout + 1)
        except (JetcronError, OSError, TimeoutError, smtplib.SMTPException) as exc:
            status, error = None, f"{type(exc).__name__}: {exc}"[:500]
        ok = not error
        metrics.child(metrics.NOTIFICATIONS, target=kind(rule), result="ok" if ok else "failed").inc()
        return DeliveryAttempt(at=at, ok=ok, status=status, error=error,
                               seconds=round(time.monotonic() - started, 4))

    async def _webhook(self, rule: NotifyRule, notice: Notice, delivery_id: str) -> tuple[int | None, str]:
        """The try as the tenant sees it: the status, and a reason that names no address or port."""
        assert rule.webhook is not None
        url = httpx.URL(rule.webhook)
        host = url.raw_host.decode("ascii")
        port = url.port or (443 if url.scheme == "https" else 80)
        body = encode(notice)
        headers = {"Host": url.netloc.decode("ascii"), "User-Agent": USER_AGENT, "Content-Type": "application/json",
                   EVENT_HEADER: notice.event.value, DELIVERY_HEADER: delivery_id}
        if rule.secret is not None:
            try:
                secret = await self.secrets.get(notice.tenant, rule.secret)
            except NotFound:
                return None, f"secret {rule.secret!r} of tenant {notice.tenant} does not exist"
            headers[SIGNATURE_HEADER] = sign(secret.encode(), int(self.clock.now().timestamp()), body)
        where: dict[str, Any] = {"delivery_id": delivery_id, "host": host, "port": port}
        deadline = self.settings.notify_timeout
        try:
            # The whole try, not each read: httpx's timeout restarts at every byte a trickling receiver sends.
            async with asyncio.timeout(deadline):
                addresses = await self._resolve(host, port)
                return await self._post(url, host, addresses, body, headers, where)
        except Unsafe as exc:
            self.log.warning("webhook refused", **where, reason=str(exc))
            return None, REFUSED
        except (TimeoutError, httpx.TimeoutException) as exc:
            self.log.debug("webhook timed out", **where, seconds=deadline, error=repr(exc))
            return None, f"timed out after {deadline:g} s"
        except socket.gaierror as exc:
            self.log.debug("webhook host does not resolve", **where, error=repr(exc))
            return None, NO_SUCH_HOST
        except (OSError, httpx.HTTPError, httpx.InvalidURL) as exc:
            self.log.debug("webhook try failed", **where, error=repr(exc))
            return None, _failure(exc)

    async def _resolve(self, host: str, port: int) -> list[str]:
        """Every address `host` resolves to, resolved once for the whole try; each one judged, unless the operator
        allows private targets (a literal was judged when the job was stored too, but the setting may have changed
        since). A name answering a private address among public ones is refused whole."""
        if _literal(host):
            addresses = [host]
        else:
            infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
            addresses = list(dict.fromkeys(str(info[4][0]) for info in infos))
        if not addresses:
            raise socket.gaierror(f"{host} resolves to no address")
        if not self.settings.notify_allow_private:
            refused = [a for a in addresses if not address_allowed(a, allow_private=False)]
            if refused:
                raise Unsafe(f"{host} resolves to {', '.join(refused)}: not a public address "
                             "(JETCRON_NOTIFY_ALLOW_PRIVATE=true allows those)")
        return addresses

    async def _post(self, url: httpx.URL, host: str, addresses: list[str], body: bytes, headers: dict[str, str],
                    where: dict[str, Any]) -> tuple[int, str]:
        """POST to the checked addresses in turn until one takes the connection; redirects are not followed (a 30x
        would name a place never checked)."""
        tls_name = {"sni_hostname": host} if url.scheme == "https" and not _literal(host) else {}
        failed: httpx.ConnectError | None = None
        # A client per try: a pooled connection would carry one try's checked address and TLS name into another's.
        async with httpx.AsyncClient(verify=self.tls, timeout=self.settings.notify_timeout, follow_redirects=False,
                                     trust_env=False) as client:
            for address in addresses:
                try:
                    async with client.stream("POST", url.copy_with(host=address), content=body, headers=headers,
                                             extensions=tls_name) as response:
                        answer = await _prefix(response)
                except httpx.ConnectError as exc:
                    self.log.debug("webhook address not connected", **where, address=address, error=repr(exc))
                    failed = exc
                    continue
                if 200 <= response.status_code < 300:
                    return response.status_code, ""
                self.log.debug("webhook answered", **where, address=address, status=response.status_code,
                               answer=answer[:200])
                return response.status_code, f"HTTP {response.status_code}"
        assert failed is not None
        raise failed

    def _email(self, rule: NotifyRule, notice: Notice) -> str:
        st = self.settings
        if st.smtp_host is None:
            return "no SMTP server is configured (JETCRON_SMTP_HOST)"
        message = EmailMessage()
        message["From"] = st.smtp_from
        message["To"] = rule.email
        message["Subject"] = f"[jetcron] {notice.job}: {notice.event.value} ({notice.run_id})"
        message["Message-ID"] = f"<{notice.id}@jetcron>"
        lines = [f"{name}: {value}" for name, value in (
            ("event", notice.event.value), ("tenant", notice.tenant), ("job", notice.job), ("run", notice.run_id),
            ("attempt", notice.attempt), ("state", notice.state), ("reason", notice.reason),
            ("exit code", notice.exit_code), ("scheduled at", notice.scheduled_at),
            ("started at", notice.started_at), ("finished at", notice.finished_at)) if value not in (None, "")]
        message.set_content("\n".join(lines) + "\n")
        with smtplib.SMTP(st.smtp_host, st.smtp_port, timeout=st.notify_timeout) as smtp:
            if st.smtp_starttls:
                smtp.starttls(context=ssl.create_default_context())
            if st.smtp_username is not None and st.smtp_password_file is not None:
                smtp.login(st.smtp_username, Path(st.smtp_password_file).read_text().strip())
            smtp.send_message(message)
        return ""


def _literal(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def _host_and_port(webhook: str) -> str:
    parts = urlsplit(webhook)
    return f"{parts.hostname}:{parts.port or (443 if parts.scheme == 'https' else 80)}"


async def _prefix(response: httpx.Response) -> bytes:
    """At most ANSWER_PREFIX bytes of the answer, as sent (a compressed body is not inflated)."""
    got = b""
    # aiter_raw is an async generator: closed here, not left suspended for the collector when the loop breaks off
    async with contextlib.aclosing(cast(AsyncGenerator[bytes, None], response.aiter_raw())) as chunks:
        async for chunk in chunks:
            got += chunk
            if len(got) >= ANSWER_PREFIX:
                break
    return got[:ANSWER_PREFIX]


def _failure(exc: BaseException) -> str:
    """What the tenant is told of a try that got no answer: what went wrong, never the address or port tried (a
    tenant could map the notifier's network with it)."""
    seen: BaseException | None = exc
    for _ in range(8):
        if seen is None:
            break
        if isinstance(seen, ssl.SSLError):
            return TLS_FAILED
        seen = seen.__cause__ or seen.__context__
    if isinstance(exc, httpx.ProtocolError):
        return NOT_HTTP
    return CONNECTION_FAILED

"""Sending one notice to one target: a webhook (signed JSON POST), a NATS subject (JetStream), or an email.

Each send answers a DeliveryAttempt and never raises for the receiver's faults: a refused connection, a 500
or a timeout is a failed try the caller records and schedules again.
"""

from __future__ import annotations

import asyncio
import contextlib
import smtplib
import socket
import ssl
import time
from collections import defaultdict
from collections.abc import AsyncIterator
from email.message import EmailMessage
from pathlib import Path
from urllib.parse import urlsplit

import httpx

from jetcron.bus.ports import Publisher, Streams
from jetcron.config import Settings
from jetcron.core.clock import Clock
from jetcron.core.errors import Forbidden, JetcronError, NotFound
from jetcron.core.models import NotifyRule
from jetcron.core.notify import (
    DELIVERY_HEADER,
    EVENT_HEADER,
    SIGNATURE_HEADER,
    DeliveryAttempt,
    Notice,
    address_allowed,
    sign,
)
from jetcron.ops.secrets import Secrets
from jetcron.telemetry import metrics
from jetcron.wire import subjects as s
from jetcron.wire.codec import encode

USER_AGENT = "jetcron-notifier/0.1"


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
    checked as each delivery is sent, where the name is resolved."""


class Targets:
    def __init__(self, settings: Settings, publisher: Publisher, streams: Streams, clock: Clock) -> None:
        self.settings = settings
        self.publisher = publisher
        self.clock = clock
        self.secrets = Secrets(publisher, streams, settings.secrets_key_file)
        # One pool, no redirects followed (a 30x to an internal address would dodge the address check).
        self.http = httpx.AsyncClient(timeout=settings.notify_timeout, follow_redirects=False,
                                      headers={"User-Agent": USER_AGENT}, trust_env=False)
        self.gates: defaultdict[str, asyncio.Semaphore] = defaultdict(
            lambda: asyncio.Semaphore(settings.notify_per_target))

    async def close(self) -> None:
        await self.http.aclose()

    @contextlib.asynccontextmanager
    async def _gate(self, host: str) -> AsyncIterator[None]:
        async with self.gates[host]:
            yield

    async def send(self, rule: NotifyRule, notice: Notice, delivery_id: str) -> DeliveryAttempt:
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
        except (JetcronError, OSError, TimeoutError, httpx.HTTPError, smtplib.SMTPException) as exc:
            status, error = None, f"{type(exc).__name__}: {exc}"[:500]
        ok = not error
        metrics.child(metrics.NOTIFICATIONS, target=kind(rule), result="ok" if ok else "failed").inc()
        return DeliveryAttempt(at=at, ok=ok, status=status, error=error,
                               seconds=round(time.monotonic() - started, 4))

    async def _webhook(self, rule: NotifyRule, notice: Notice, delivery_id: str) -> tuple[int | None, str]:
        assert rule.webhook is not None
        parts = urlsplit(rule.webhook)
        host = parts.hostname or ""
        await self._check_host(host, parts.port or (443 if parts.scheme == "https" else 80))
        body = encode(notice)
        headers = {"Content-Type": "application/json", EVENT_HEADER: notice.event.value,
                   DELIVERY_HEADER: delivery_id}
        if rule.secret is not None:
            try:
                secret = await self.secrets.get(notice.tenant, rule.secret)
            except NotFound:
                return None, f"secret {rule.secret!r} of tenant {notice.tenant} does not exist"
            headers[SIGNATURE_HEADER] = sign(secret.encode(), int(self.clock.now().timestamp()), body)
        async with self._gate(f"{host}:{parts.port}"):
            response = await self.http.post(rule.webhook, content=body, headers=headers)
        if 200 <= response.status_code < 300:
            return response.status_code, ""
        return response.status_code, f"HTTP {response.status_code}"

    async def _check_host(self, host: str, port: int) -> None:
        """Every address the name resolves to must be allowed, at each try (a name may move; a literal was checked
        when the job was stored, but the operator's setting may have changed since)."""
        if self.settings.notify_allow_private:
            return
        loop = asyncio.get_running_loop()
        infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        for info in infos:
            address = str(info[4][0])
            if not address_allowed(address, allow_private=False):
                raise Unsafe(f"{host} resolves to {address}, a loopback, private or link-local address "
                             "(JETCRON_NOTIFY_ALLOW_PRIVATE=true allows those)")

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

"""Settings: the HTTP gateway's REST API and the dashboard's sessions."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from jetcron.config.group import SettingsGroup


class GatewaySettings(SettingsGroup):
    """Where the gateway listens, how it is reached from outside, and how long a dashboard login lasts."""

    http_port: int = Field(default=8080, ge=0, le=65535)
    """The HTTP gateway's REST API port (0 picks a free one and logs it)."""
    http_host: str = "127.0.0.1"
    """Address the gateway's REST API binds to; 0.0.0.0 in a container (every request needs a bearer token)."""
    http_api_timeout: float = Field(default=10.0, gt=0)
    """Seconds the gateway waits for the API service to answer one verb before answering 503."""
    http_public_url: str = Field(default="", pattern=r"^(https?://[^/?#\s]+(/[^?#\s]*)?)?$")
    """The REST API's URL as its users reach it (e.g. https://jetcron.example.com behind a proxy, with a path
    prefix if the proxy adds one): the gateway's absolute links (a job's logs_url) start with it. Empty: each
    request's own scheme, host and port."""
    ui_trace_url: str = ""
    """The dashboard links a run's trace here: a URL with `{trace_id}` in it (your Jaeger, Tempo or Honeycomb
    trace view, e.g. http://jaeger.example:16686/trace/{trace_id}); empty shows the id unlinked."""
    ui_session_seconds: float = Field(default=12 * 3600.0, ge=60)
    """How long a dashboard login lasts: the session cookie's Max-Age, and checked by the gateway on every request
    (an older session is refused whatever the browser sends). Revoking the token ends its sessions at once."""
    ui_session_key_file: str | None = None
    """A file of at least 32 random bytes the gateway signs dashboard sessions with; every gateway replica behind
    one address needs the same. Unset: derived from the gateway's NATS credential (JETCRON_NATS_CREDS, which its
    replicas share), else random at each start (sessions then end with the process)."""
    ui_cookie_secure: Literal["auto", "always", "never"] = "auto"
    """`Secure` on the dashboard's session cookie. `auto`: when the browser reached the gateway over TLS, to the
    gateway itself or to a proxy in http_trusted_proxies that says so (X-Forwarded-Proto), and on plain http from
    anywhere but loopback (TLS ended elsewhere); not on plain http from loopback (`jetcron up`)."""
    http_trusted_proxies: str = "127.0.0.1,::1"
    """Addresses or networks (CIDR), comma-separated, of the proxies in front of the gateway whose
    X-Forwarded-Proto it believes; empty: none."""
    http_log_followers: int = Field(default=8, ge=1)
    """Log streams one token may have open at once on one gateway replica (`GET .../logs?follow=1` and the
    dashboard's live output): one more is refused with 429."""

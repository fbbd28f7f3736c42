"""Who is looking at the dashboard: a signed, expiring session cookie, and CSRF protection.

Logging in checks the HTTP API token the viewer typed (the same token `Authorization: Bearer` takes) and sets a
cookie that holds no secret of it: the token's id, when the session began, and an HMAC-SHA256 of both (and of the
token's stored digest) under the gateway's session key. Every request checks the signature, the session's age
against JETCRON_UI_SESSION_SECONDS (the cookie's Max-Age too), and the token's record in jc_tokens as the REST API
does, so a revoked token ends its sessions at once, a copied cookie is worth a session and never the token, and
any replica holding the same key serves any request. The cookie is HttpOnly (no script reads it),
SameSite=Strict (no other site's page sends it) and Secure whenever the browser reached the gateway over TLS
(cookie_secure). Every state-changing request also carries a CSRF token derived from the session by HMAC (a
synchronizer token that needs no server-side store), and a cross-origin `Origin` is refused.
docs/dashboard.md explains the choices.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import ipaddress
import secrets
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import quote, urlsplit

from litestar import Request, Response
from litestar.datastructures import Cookie

from jetcron.auth.tokens import TOKEN_ID_RE, TokenRecord, token_id_of, verify
from jetcron.core.errors import Forbidden, Misconfigured, Unauthorized
from jetcron.telemetry import metrics
from jetcron_services.gateway.gate import Gate, gate_of

COOKIE = "jetcron_session"
CSRF_FIELD = "csrf"
CSRF_HEADER = "x-csrf-token"
UI = "/ui"
SESSION_SECONDS = 12 * 3600.0
CLOCK_SKEW = 60.0
"""Seconds a session may seem to begin in the future: replicas' clocks differ a little."""
VERSION = "v1"
Network = ipaddress.IPv4Network | ipaddress.IPv6Network
LOOPBACK: tuple[Network, ...] = (ipaddress.ip_network("127.0.0.0/8"), ipaddress.ip_network("::1/128"))
SecureMode = Literal["auto", "always", "never"]


class LoginRequired(Unauthorized):
    """No valid session: pages redirect to the login form, actions answer 401. In the gateway: a session is the
    dashboard's."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.path = path


class CsrfRefused(Forbidden):
    """A state-changing request without its CSRF token, or from another origin (403). In the gateway: the check is
    the dashboard's forms'."""


@dataclass(frozen=True)
class Sessions:
    """How the gateway signs and judges dashboard sessions (service.py makes it from the settings)."""

    key: bytes = field(default_factory=lambda: secrets.token_bytes(32), repr=False)
    """The HMAC key sessions are signed with: every replica behind one address needs the same."""
    max_age: float = SESSION_SECONDS
    secure: SecureMode = "auto"
    trusted_proxies: tuple[Network, ...] = LOOPBACK
    """Peers whose X-Forwarded-Proto is believed."""
    clock: Callable[[], float] = time.time


def sessions_of(request: Request[Any, Any, Any]) -> Sessions:
    found: Sessions = request.app.state.sessions
    return found


def proxies(text: str) -> tuple[Network, ...]:
    """JETCRON_HTTP_TRUSTED_PROXIES: addresses or networks, comma-separated (empty: none)."""
    out: list[Network] = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        try:
            out.append(ipaddress.ip_network(part, strict=False))
        except ValueError:
            raise Misconfigured(f"JETCRON_HTTP_TRUSTED_PROXIES: {part!r} is not an IP address or network "
                                "(CIDR); give them comma-separated") from None
    return tuple(out)


def _within(host: str | None, networks: Iterable[Network]) -> bool:
    try:
        address = ipaddress.ip_address(host or "")
    except ValueError:
        return False
    return any(address in network for network in networks)


def cookie_secure(sessions: Sessions, scheme: str, peer: str | None, forwarded_proto: str | None) -> bool:
    """Whether the browser reached the gateway over TLS, so the cookie is Secure.

    TLS to the gateway itself: yes. A trusted proxy's X-Forwarded-Proto (its last hop's, the one the proxy wrote)
    says what the browser used. Otherwise plain http is taken for TLS ended by a proxy elsewhere (Secure), except
    from a loopback peer with no trusted word: a browser on the gateway's own machine, as `jetcron up` serves it.
    """
    if sessions.secure != "auto":
        return sessions.secure == "always"
    if scheme == "https":
        return True
    if forwarded_proto and _within(peer, sessions.trusted_proxies):
        return forwarded_proto.split(",")[-1].strip().lower() == "https"
    return not _within(peer, LOOPBACK)


def _mac(sessions: Sessions, token_id: str, began: int, record: TokenRecord) -> str:
    message = f"jetcron-ui-session|{VERSION}|{token_id}|{began}|{record.digest}".encode()
    digest = hmac.new(sessions.key, message, hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def open_session(sessions: Sessions, record: TokenRecord) -> str:
    """The cookie's value for a session of `record`'s token beginning now: `v1.<token id>.<unix time>.<mac>`."""
    began = int(sessions.clock())
    return f"{VERSION}.{record.token_id}.{began}.{_mac(sessions, record.token_id, began, record)}"


def session_record(gate: Gate, sessions: Sessions, value: str) -> TokenRecord | None:
    """The token record of a session cookie still good: signed by this key, younger than the max age, and its
    token not revoked; None otherwise."""
    parts = value.split(".")
    if len(parts) != 4 or parts[0] != VERSION or not TOKEN_ID_RE.fullmatch(parts[1]) \
            or not parts[2].isascii() or not parts[2].isdigit():
        return None
    token_id, began = parts[1], int(parts[2])
    age = sessions.clock() - began
    if not -CLOCK_SKEW <= age < sessions.max_age:
        return None
    record = gate.lookup(token_id)
    if record is None or not hmac.compare_digest(parts[3], _mac(sessions, token_id, began, record)):
        return None
    return record


def csrf_token(sessions: Sessions, session: str) -> str:
    return hmac.new(sessions.key, f"jetcron-ui-csrf|{session}".encode(), hashlib.sha256).hexdigest()


def check_token(gate: Gate, token: str) -> TokenRecord | None:
    token_id = token_id_of(token)
    record = gate.lookup(token_id) if token_id else None
    if record is None or not verify(token, record):
        return None
    return record


def viewer(request: Request[Any, Any, Any]) -> tuple[Gate, TokenRecord, str]:
    """The gate, the session's token record and the CSRF token its forms must carry."""
    gate, sessions = gate_of(request), sessions_of(request)
    value = request.cookies.get(COOKIE, "")
    record = session_record(gate, sessions, value) if value else None
    if record is None:
        if value:
            metrics.child(metrics.AUTH_FAILURES, kind="http_token").inc()
        raise LoginRequired(request.url.path)
    return gate, record, csrf_token(sessions, value)


def cross_origin(request: Request[Any, Any, Any]) -> bool:
    """The browser says the request comes from a page of another site."""
    origin = request.headers.get("origin")
    return bool(origin) and urlsplit(origin).netloc != request.headers.get("host", "")


async def changer(request: Request[Any, Any, Any]) -> tuple[Gate, TokenRecord]:
    """The viewer of a state-changing request, once its origin and CSRF token check out."""
    gate, record, expected = viewer(request)
    if cross_origin(request):
        raise CsrfRefused(f"a request from another origin ({request.headers['origin']}) may not change anything")
    sent = request.headers.get(CSRF_HEADER)
    if sent is None:
        form = await request.form()
        value = form.get(CSRF_FIELD)
        sent = value if isinstance(value, str) else None
    if not sent or not hmac.compare_digest(sent, expected):
        raise CsrfRefused("the form's CSRF token is missing or stale: reload the page and try again")
    return gate, record


def login_redirect(path: str) -> str:
    return f"{UI}/login?next={quote(path, safe='/')}"


def safe_next(value: str | None) -> str:
    """Only a path of the dashboard: never an open redirect to another site."""
    if value and (value == UI or value.startswith(UI + "/")) and "\\" not in value:
        return value
    return UI


def session_cookie(request: Request[Any, Any, Any], record: TokenRecord) -> Cookie:
    """A new session of `record`'s token, as the cookie that carries it."""
    sessions = sessions_of(request)
    secure = cookie_secure(sessions, request.url.scheme, request.client.host if request.client else None,
                           request.headers.get("x-forwarded-proto"))
    return Cookie(key=COOKIE, value=open_session(sessions, record), path=UI, httponly=True, samesite="strict",
                  secure=secure, max_age=int(sessions.max_age))


def end_session(response: Response[Any]) -> Response[Any]:
    response.delete_cookie(COOKIE, path=UI)
    return response

"""Who is looking at the dashboard: a session cookie that holds an HTTP API token, and CSRF protection.

The cookie carries the token the viewer typed at login (the same token `Authorization: Bearer` takes), marked
HttpOnly (no script reads it), SameSite=Strict (no other site's page sends it) and Secure behind TLS; every request
checks it against jc_tokens as the REST API does, so a revoked token ends its sessions at once and any replica
serves any request. Every state-changing request also carries a CSRF token derived from the session token by
HMAC (a synchronizer token that needs no server-side store), and a cross-origin `Origin` is refused.
docs/dashboard.md explains the choice.
"""

from __future__ import annotations

import hashlib
import hmac
from typing import Any
from urllib.parse import quote, urlsplit

from litestar import Request, Response
from litestar.datastructures import Cookie

from jetcron.auth.tokens import TokenRecord, token_id_of, verify
from jetcron.core.errors import Forbidden, Unauthorized
from jetcron.services.gateway.gate import Gate, gate_of
from jetcron.telemetry import metrics

COOKIE = "jetcron_session"
CSRF_FIELD = "csrf"
CSRF_HEADER = "x-csrf-token"
UI = "/ui"


class LoginRequired(Unauthorized):
    """No valid session: pages redirect to the login form, actions answer 401. In the gateway: a session is the
    dashboard's."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.path = path


class CsrfRefused(Forbidden):
    """A state-changing request without its CSRF token, or from another origin (403). In the gateway: the check is
    the dashboard's forms'."""


def csrf_token(session_token: str) -> str:
    return hmac.new(session_token.encode(), b"jetcron-ui-csrf", hashlib.sha256).hexdigest()


def check_token(gate: Gate, token: str) -> TokenRecord | None:
    token_id = token_id_of(token)
    record = gate.lookup(token_id) if token_id else None
    if record is None or not verify(token, record):
        return None
    return record


def viewer(request: Request[Any, Any, Any]) -> tuple[Gate, TokenRecord, str]:
    """The gate, the session's token record and the CSRF token its forms must carry."""
    gate = gate_of(request)
    token = request.cookies.get(COOKIE, "")
    record = check_token(gate, token) if token else None
    if record is None:
        if token:
            metrics.child(metrics.AUTH_FAILURES, kind="http_token").inc()
        raise LoginRequired(request.url.path)
    return gate, record, csrf_token(token)


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


def session_cookie(request: Request[Any, Any, Any], token: str) -> Cookie:
    return Cookie(key=COOKIE, value=token, path=UI, httponly=True, samesite="strict",
                  secure=request.url.scheme == "https")


def end_session(response: Response[Any]) -> Response[Any]:
    response.delete_cookie(COOKIE, path=UI)
    return response

"""The REST app: routes from jobs.py, runs.py and admin.py; errors as RFC 9457 problems; OpenAPI 3.1; health;
the dashboard under /ui (ui/).

No logic of the API lives here: a route reads the request, calls one or a few verbs through the SDK, and shapes
the reply (design.py). docs/rest-api.md is the user's guide.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Callable
from typing import Any

import msgspec
import structlog
from litestar import Litestar, Request, Response, get
from litestar.enums import ScopeType
from litestar.exceptions import HTTPException, ValidationException
from litestar.response import Redirect
from litestar.types import ASGIApp, Message, Receive, Scope, Send

from jetcron_services.gateway import admin, calendars, contract, jobs, runs, ui
from jetcron_services.gateway.gate import API, PATH_RULES, Gate, HttpProblem, WholeResponse, field_of, gate_of
from jetcron_services.gateway.problems import PROBLEM_JSON, Problem, problem
from jetcron_services.gateway.ui.session import Sessions

log = structlog.get_logger("jetcron.gateway")
OPENAPI = "/api/docs"
MAX_BODY = 1024 * 1024


def _problem_response(body: Problem, headers: dict[str, Any] | None = None) -> Response[bytes]:
    return Response(msgspec.json.encode(body), status_code=body.status, media_type=PROBLEM_JSON,
                    headers=headers or {})


_DOCUMENT = contract.document()
REDOC = "/ui/static/redoc-2.5.2.standalone.js"
"""Redoc's standalone bundle, vendored from the npm package redoc 2.5.2 (bundles/redoc.standalone.js) with its
licence: served from the gateway's own origin, never a CDN's."""
REDOC_SHA256 = "6beb5aea23b71d09122ee35de8f326e38aec050e774f3bfba1f34e5c36608986"
"""The vendored file's SHA-256 (the npm package's own): the page names it as the script's integrity, and a unit
test checks the file against it."""
_INTEGRITY = "sha256-" + base64.b64encode(bytes.fromhex(REDOC_SHA256)).decode()
_REDOC = ('<!doctype html><html><head><meta charset="utf-8"><title>jetcron REST API</title>'
          '<link rel="icon" href="data:,"></head><body>'
          f'<redoc spec-url="{API}/openapi.json"></redoc>'
          f'<script src="{REDOC}" integrity="{_INTEGRITY}"></script></body></html>')
DOCS_POLICY = ("default-src 'none'; script-src 'self'; worker-src blob:; connect-src 'self'; img-src 'self' data:; "
               "style-src 'self' 'unsafe-inline'; font-src 'self' data:; base-uri 'none'; form-action 'none'; "
               "frame-ancestors 'none'")
"""The docs page's Content-Security-Policy: scripts from this origin alone (no inline one, no other site's), the
contract fetched from here. Redoc adds its styles inline and runs its search in a worker made from a blob; the
logo it shows from its makers' CDN is refused."""


@get(f"{API}/openapi.json", include_in_schema=False, media_type="application/vnd.oai.openapi+json")
async def openapi_json() -> dict[str, Any]:
    """The contract (gateway.contract): made from one row per operation, not from the handlers' signatures."""
    return _DOCUMENT


@get(OPENAPI, include_in_schema=False, media_type="text/html")
async def redoc() -> Response[str]:
    return Response(_REDOC, media_type="text/html",
                    headers={"Content-Security-Policy": DOCS_POLICY, "X-Content-Type-Options": "nosniff",
                             "Referrer-Policy": "no-referrer"})


@get(f"{API}/docs", include_in_schema=False)
async def docs() -> Redirect:
    return Redirect(OPENAPI)


@get("/livez", include_in_schema=False)
async def livez() -> str:
    return "ok"


@get("/readyz", include_in_schema=False)
async def readyz(request: Request[Any, Any, Any]) -> Response[str]:
    why = gate_of(request).ready()
    return Response("ready" if why is None else why, status_code=200 if why is None else 503,
                    media_type="text/plain")


def _on_problem(_: Request[Any, Any, Any], exc: HttpProblem) -> Response[bytes]:
    return _problem_response(exc.body, exc.headers)


def _on_validation(_: Request[Any, Any, Any], exc: ValidationException) -> Response[bytes]:
    """Litestar's own body and parameter checks: malformed JSON is 400, a well-formed body that fails is 422."""
    detail = str(exc.detail)
    extra = exc.extra if isinstance(exc.extra, list) else []
    first = extra[0] if extra and isinstance(extra[0], dict) else {}
    message = str(first.get("message", detail))
    key = first.get("key")
    field = field_of(message, str(key) if key and key != "data" else "")
    malformed = "malformed" in detail.lower() or "JSON is malformed" in message or "truncated" in message
    return _problem_response(problem(400 if malformed else 422, message if message else detail,
                                     code="invalid", field=str(field) if field else None))


def _on_http(_: Request[Any, Any, Any], exc: HTTPException) -> Response[bytes]:
    status = exc.status_code
    return _problem_response(problem(status, str(exc.detail), code="invalid" if status < 500 else "internal"),
                             exc.headers)


def _on_too_deep(_: Request[Any, Any, Any], exc: RecursionError) -> Response[bytes]:
    """JSON nested past the decoder's recursion limit: the body is malformed for us, not a bug."""
    return _problem_response(problem(400, "the JSON body is nested too deeply", code="invalid"))


def _on_error(request: Request[Any, Any, Any], exc: Exception) -> Response[bytes]:
    """A bug of ours: logged with its stack (the path, never the body or headers: they may hold a token or a
    secret), answered as a plain 500."""
    log.error("gateway request failed", method=request.method, path=request.url.path, exc_info=exc)
    return _problem_response(problem(500, f"internal error ({type(exc).__name__})", code="internal"))


_ALLOW = {path: ", ".join(sorted({op.method.upper() for op in contract.OPS if op.path == path} | {"OPTIONS"}))
          for path in {op.path for op in contract.OPS}}
"""Per path of the contract, what OPTIONS answers in `Allow`: every method the contract gives that path."""


def _allow_from_contract(app: ASGIApp) -> ASGIApp:
    """OPTIONS names every method of its path. Litestar's own OPTIONS handler is made with the path's first route
    handler and keeps that one's methods only (GET /jobs missing from `Allow: OPTIONS, POST`)."""

    async def middleware(scope: Scope, receive: Receive, send: Send) -> None:
        allow = _ALLOW.get(re.sub(r"\{(\w+):\w+\}", r"{\1}", str(scope.get("path_template", "")))) \
            if scope["type"] == ScopeType.HTTP and scope.get("method") == "OPTIONS" else None
        if allow is None:
            await app(scope, receive, send)
            return

        async def send_allow(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [(k, v) for k, v in message.get("headers", []) if k.lower() != b"allow"]
                message = {**message, "headers": [*headers, (b"allow", allow.encode())]}
            await send(message)

        await app(scope, receive, send_allow)

    return middleware


_ROUTES: list[Any] = [*jobs.ROUTES, *runs.ROUTES, *admin.ROUTES, *calendars.ROUTES,
                      openapi_json, redoc, docs, livez, readyz]


def build_app(gate: Gate, *, trace_url: str = "", public_url: str = "", sessions: Sessions | None = None) -> Litestar:
    """`sessions`: how dashboard sessions are signed and judged; a fresh random key when not given (sessions then
    end with the process)."""
    handlers: dict[Any, Callable[..., Any]] = {
        HttpProblem: _on_problem, ValidationException: _on_validation, HTTPException: _on_http,
        RecursionError: _on_too_deep, Exception: _on_error, **ui.HANDLERS,
    }
    # No OpenAPI of Litestar's own: the document is the contract's (gateway.contract), served by openapi_json.
    app = Litestar(route_handlers=[*_ROUTES, *ui.ROUTES], openapi_config=None, exception_handlers=handlers,
                   request_max_body_size=MAX_BODY, template_config=ui.TEMPLATES, debug=False,
                   middleware=[_allow_from_contract], response_class=WholeResponse)
    app.state.gate = gate
    app.state[PATH_RULES] = contract.path_rules()
    app.state.trace_url = trace_url
    app.state.public_url = public_url.rstrip("/")
    app.state.sessions = sessions or Sessions()
    return app


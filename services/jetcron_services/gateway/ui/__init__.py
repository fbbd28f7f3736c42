"""The web dashboard: Jinja pages, htmx actions and server-sent events under /ui, in the gateway's process.

docs/dashboard.md is the user's guide; pages the routes, present.py what they compute, session.py who is
looking. htmx is vendored in static/ with its licence (no JavaScript build step).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import quote

import msgspec
from litestar import Request, Response
from litestar.plugins.jinja import JinjaTemplateEngine
from litestar.response import Redirect, Template
from litestar.static_files import create_static_files_router
from litestar.template.config import TemplateConfig

from jetcron.sdk.errors import ApiError
from jetcron_services.gateway.problems import PROBLEM_JSON, problem, status_of
from jetcron_services.gateway.ui import present
from jetcron_services.gateway.ui.pages import ROUTES as PAGES
from jetcron_services.gateway.ui.session import UI, CsrfRefused, LoginRequired, login_redirect

HERE = Path(__file__).parent


def _engine(engine: JinjaTemplateEngine) -> None:
    env = engine.engine
    env.autoescape = True
    env.filters["q"] = lambda value: quote(str(value), safe="")
    env.filters["iso"] = lambda at: at.isoformat().replace("+00:00", "Z") if at is not None else ""
    env.globals["tone"] = present.tone


TEMPLATES = TemplateConfig(directory=HERE / "templates", engine=JinjaTemplateEngine, engine_callback=_engine)
STATIC = create_static_files_router(path=f"{UI}/static", directories=[HERE / "static"], include_in_schema=False,
                                    cache_control=None)


def _is_action(request: Request[Any, Any, Any]) -> bool:
    return request.method != "GET" or request.headers.get("hx-request") == "true"


def _on_login_required(request: Request[Any, Any, Any], exc: LoginRequired) -> Response[Any]:
    if _is_action(request) or exc.path.endswith("/log"):
        return Response("log in first", status_code=401, media_type="text/plain")
    return Redirect(login_redirect(exc.path + (f"?{request.url.query}" if request.url.query else "")))


def _on_forbidden(_: Request[Any, Any, Any], exc: CsrfRefused) -> Response[Any]:
    return Template(template_name="error.html", status_code=403,
                    context={"status": 403, "message": str(exc), "who": None})


def _on_api_error(request: Request[Any, Any, Any], exc: ApiError) -> Response[Any]:
    status = status_of(exc.code, exc.retryable)
    if not request.url.path.startswith(UI):
        body = problem(status, str(exc), code=exc.code, field=exc.field, value=exc.value)
        return Response(msgspec.json.encode(body), status_code=status, media_type=PROBLEM_JSON)
    return Template(template_name="error.html", status_code=status,
                    context={"status": status, "message": str(exc), "who": None})


HANDLERS: dict[Any, Any] = {LoginRequired: _on_login_required, CsrfRefused: _on_forbidden, ApiError: _on_api_error}
ROUTES: list[Any] = [*PAGES, STATIC]

__all__ = ["HANDLERS", "ROUTES", "TEMPLATES"]

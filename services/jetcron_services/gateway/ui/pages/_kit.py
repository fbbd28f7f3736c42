"""What every page and action shares: the viewer's context, a part that may fail alone, and an action's answer."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any, TypeVar
from urllib.parse import urlencode

from litestar import Request, Response
from litestar.datastructures import UploadFile
from litestar.response import Redirect, Template

from jetcron.auth.tokens import TokenRecord
from jetcron.core.errors import InvalidSpec
from jetcron.core.ids import job_key
from jetcron.core.models import JobSpec, Run
from jetcron.core.timing.calendars import CalendarSpec
from jetcron.sdk.client import Client
from jetcron.sdk.errors import ApiError
from jetcron_services.gateway.gate import Gate
from jetcron_services.gateway.ui import present
from jetcron_services.gateway.ui.session import CSRF_FIELD, UI, changer, viewer

T = TypeVar("T")
PAGE = 50
SEARCH_PAGES = 20


class Context:
    """What every page's template gets: who is looking, their CSRF token, and the trace link template."""

    def __init__(self, gate: Gate, who: TokenRecord, csrf: str, request: Request[Any, Any, Any]) -> None:
        self.gate, self.who, self.csrf = gate, who, csrf
        self.client = gate.client(who.tenant)
        self.trace_url: str = request.app.state.get("trace_url", "")
        self.message = request.query_params.get("error", "")
        self.notice = request.query_params.get("done", "")

    def page(self, template: str, **values: Any) -> Template:
        return Template(template_name=template, context={
            "who": self.who, "admin": self.who.tenant is None, "csrf": self.csrf, "csrf_field": CSRF_FIELD,
            "error": self.message, "done": self.notice, "tone": present.tone, "now": datetime.now(UTC), **values})

    def ref(self, spec: JobSpec | CalendarSpec) -> str:
        """How the viewer names a job or a calendar to the API: a tenant by its name, the admin by its key."""
        return spec.key if self.who.tenant is None else spec.name

    def calendar_ref(self, tenant: str, name: str) -> str:
        """A calendar a job names (by its name, within the job's tenant), as the viewer names it to the API."""
        return job_key(tenant, name) if self.who.tenant is None else name

    def job_of_run(self, run: Run) -> str:
        if run.spec is not None:
            return self.ref(run.spec)
        return run.job if self.who.tenant is None else run.job.split(".", 1)[-1]


def page_context(request: Request[Any, Any, Any]) -> Context:
    """The context of a page for the viewer its request comes from."""
    gate, who, csrf = viewer(request)
    return Context(gate, who, csrf, request)


async def tolerant(call: Awaitable[T]) -> T | ApiError:
    """A part of a page that may fail alone (a tracker not ready, an admin-only view): shown as its error."""
    try:
        return await call
    except ApiError as exc:
        return exc


def _with(to: str, *, error: str = "", done: str = "") -> str:
    query = urlencode({k: v[:300] for k, v in (("error", error), ("done", done)) if v})
    return f"{to}?{query}" if query else to


def _go(request: Request[Any, Any, Any], to: str) -> Response[Any]:
    """A plain form gets a redirect; htmx (which would follow it and swap the whole page into the form) is told
    where to go instead."""
    if request.headers.get("hx-request") == "true":
        return Response("", status_code=200, headers={"HX-Redirect": to})
    return Redirect(to, status_code=303)


async def run_action(request: Request[Any, Any, Any], back: str, op: Callable[[Client], Awaitable[str]]
               ) -> Response[Any]:
    """Run an action as the viewer; on success go where it says (or back with its notice), else back with the
    API's error (field and value named as the API names them)."""
    gate, who = await changer(request)
    try:
        to = await op(gate.client(who.tenant))
    except (ApiError, InvalidSpec) as exc:
        return _go(request, _with(back, error=str(exc)))
    return _go(request, to if to.startswith(UI) else _with(back, done=to))


async def read_form(request: Request[Any, Any, Any]) -> dict[str, str]:
    """The form's text fields (an uploaded file is left out)."""
    form = await request.form()
    return {k: v for k, v in form.items() if isinstance(v, str) and not isinstance(v, UploadFile)}

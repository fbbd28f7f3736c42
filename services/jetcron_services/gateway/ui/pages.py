"""The dashboard's pages and actions, under /ui: server-rendered, each one or a few typed SDK calls as the viewer.

Like the REST routes, no logic of the API lives here: a page asks the API service for what its viewer may see
(a tenant's token sees its tenant, the admin's sees all), and shapes it with present.py. Actions are plain HTML
forms (htmx submits them and asks for confirmation); each answers with a redirect to the page that shows the
result, or back with the API's error as a message.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from typing import Any, TypeVar
from urllib.parse import quote, urlencode

import msgspec
from litestar import Request, Response, get, post
from litestar.datastructures import UploadFile
from litestar.response import Redirect, ServerSentEvent, Template
from litestar.response.sse import ServerSentEventMessage

from jetcron.auth.tokens import TokenRecord
from jetcron.core.calendars import CalendarSpec
from jetcron.core.errors import InvalidSpec
from jetcron.core.finished import dense
from jetcron.core.ids import job_key, replay_of, stamp_of
from jetcron.core.models import JobRecord, JobSpec, Run
from jetcron.core.run_state import RunState
from jetcron.core.validate import decode_as
from jetcron.sdk.client import Client
from jetcron.sdk.errors import ApiError
from jetcron.wire.api import ClusterStatus
from jetcron.wire.codec import plain
from jetcron_services.gateway.gate import Gate, gate_of, held
from jetcron_services.gateway.ui import present
from jetcron_services.gateway.ui.session import (
    CSRF_FIELD,
    UI,
    changer,
    check_token,
    cross_origin,
    end_session,
    safe_next,
    session_cookie,
    viewer,
)

T = TypeVar("T")
PAGE = 50
GRID_RUNS = 12
OVERVIEW_JOBS = 200
OVERVIEW_MINUTES = 60
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


def _context(request: Request[Any, Any, Any]) -> Context:
    gate, who, csrf = viewer(request)
    return Context(gate, who, csrf, request)


async def _tolerant(call: Awaitable[T]) -> T | ApiError:
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


async def _act(request: Request[Any, Any, Any], back: str, op: Callable[[Client], Awaitable[str]]
               ) -> Response[Any]:
    """Run an action as the viewer; on success go where it says (or back with its notice), else back with the
    API's error (field and value named as the API names them)."""
    gate, who = await changer(request)
    try:
        to = await op(gate.client(who.tenant))
    except (ApiError, InvalidSpec) as exc:
        return _go(request, _with(back, error=str(exc)))
    return _go(request, to if to.startswith(UI) else _with(back, done=to))


async def _form(request: Request[Any, Any, Any]) -> dict[str, str]:
    form = await request.form()
    return {k: v for k, v in form.items() if isinstance(v, str) and not isinstance(v, UploadFile)}


# --- login ---------------------------------------------------------------------------------------------------


@get(f"{UI}/login", include_in_schema=False)
async def login_page(next_page: str | None = None) -> Template:
    return Template(template_name="login.html", context={"next": safe_next(next_page), "error": ""})


@post(f"{UI}/login", include_in_schema=False)
async def login(request: Request[Any, Any, Any]) -> Response[Any]:
    form = await _form(request)
    token = form.get("token", "").strip()
    where = safe_next(form.get("next"))
    if cross_origin(request):
        return Template(template_name="login.html", status_code=403,
                        context={"next": where, "error": "a login from another site's page is refused"})
    record = check_token(gate_of(request), token) if token else None
    if record is None:
        return Template(template_name="login.html", status_code=401, context={
            "next": where, "error": "that token is not valid (tokens start with jct_; "
                                    "`jetcron tokens create --tenant NAME` issues one)"})
    response: Response[Any] = Redirect(where, status_code=303)
    response.set_cookie(session_cookie(request, record))
    return response


@post(f"{UI}/logout", include_in_schema=False)
async def logout(request: Request[Any, Any, Any]) -> Response[Any]:
    await changer(request)
    return end_session(Redirect(f"{UI}/login", status_code=303))


# --- overview ------------------------------------------------------------------------------------------------


@get(UI, include_in_schema=False)
async def overview(request: Request[Any, Any, Any]) -> Template:
    """A fixed handful of API calls, made together, however many jobs and runs the viewer has: one page of jobs
    (counted), each active state's runs (the trackers' index), the dead letters, the finished runs per minute and,
    for the admin, the cluster's status."""
    ctx = _context(request)
    c = ctx.client
    now = datetime.now(UTC)
    states = (RunState.WAITING, RunState.SCHEDULED, RunState.ASSIGNED, RunState.RUNNING, RunState.RETRY_WAIT)
    listed = asyncio.gather(*(_tolerant(c.runs.list(state=state, limit=1000)) for state in states))
    jobs, dead, finished, cluster, pages = await asyncio.gather(
        c.jobs.list(limit=OVERVIEW_JOBS), _tolerant(c.dlq.list(limit=1000)),
        _tolerant(c.runs.finished(minutes=OVERVIEW_MINUTES)), _cluster(ctx), listed)
    active = dict(zip(states, pages, strict=True))
    depth: dict[str, int] = {}
    scheduled = active[RunState.SCHEDULED]
    if not isinstance(scheduled, ApiError):
        for run in scheduled.items:
            priority = str(run.spec.priority) if run.spec else "normal"
            depth[priority] = depth.get(priority, 0) + 1
    # How long the runs running now waited past their due time: read with the running ones, no call of its own.
    running = active[RunState.RUNNING]
    waits = [] if isinstance(running, ApiError) else [w for r in running.items
                                                      if (w := present.wait_seconds(r)) is not None]
    if cluster is not None and not isinstance(cluster, ApiError):
        depth = {p: n for p, n in cluster.queue_depth.items() if n}  # the whole placement queue, not a sample
    # Every finished run of the cluster (the admin) or of the viewer's tenant, counted by the trackers.
    minutes = dense([] if isinstance(finished, ApiError) else finished.items, now, OVERVIEW_MINUTES)
    return ctx.page("overview.html", jobs=len(jobs.items), more_jobs=jobs.next_cursor is not None, active=active,
                    depth=depth, sampled=len(waits), cluster=cluster,
                    chart=present.stacked_bars(minutes), totals=present.finished_totals(minutes),
                    chart_minutes=OVERVIEW_MINUTES, finished_error=finished if isinstance(finished, ApiError) else None,
                    wait_p99=present.duration(present.percentile(waits, 99)),
                    wait_p50=present.duration(present.percentile(waits, 50)), dead=dead)


async def _cluster(ctx: Context) -> ClusterStatus | ApiError | None:
    """The cluster's status for the admin (an admin verb); None for a tenant."""
    return await _tolerant(ctx.client.cluster.status()) if ctx.who.tenant is None else None


# --- jobs ----------------------------------------------------------------------------------------------------


@get(f"{UI}/jobs", include_in_schema=False)
async def jobs_page(request: Request[Any, Any, Any], queue: str | None = None, q: str | None = None,
                    cursor: str | None = None, status: str | None = None) -> Template:
    ctx = _context(request)
    c = ctx.client
    now = datetime.now(UTC)
    queue = queue or None
    items: list[JobRecord] = []
    next_cursor = cursor
    # A search reads pages until it has a page of matches (the API lists by name; it has no text search).
    for _ in range(SEARCH_PAGES if q else 1):
        page = await c.jobs.list(cursor=next_cursor, limit=PAGE if not q else 500, queue=queue)
        items.extend(j for j in page.items if (not q or q.lower() in j.spec.name.lower())
                     and (not status or j.status == status))
        next_cursor = page.next_cursor
        if not next_cursor or len(items) >= PAGE:
            break
    items = items[:PAGE]
    grids = await asyncio.gather(*(c.runs.list(job=ctx.ref(j.spec), newest=True, limit=GRID_RUNS) for j in items))
    rows = [{"job": j, "ref": ctx.ref(j.spec), "words": present.schedule_words(j.spec.schedule),
             "next": present.next_fire(j, now), "runs": list(reversed(g.items))} for j, g in zip(items, grids,
                                                                                                 strict=True)]
    return ctx.page("jobs.html", rows=rows, queue=queue or "", q=q or "", status=status or "",
                    next_cursor=next_cursor, cursor=cursor or "")


def _spec_from_form(form: dict[str, str], tenant: str | None, base: JobSpec | None = None) -> JobSpec:
    """A spec from the create and edit forms: a shell command, one schedule, queue, priority, timeout."""
    kind = form.get("schedule_kind", "now")
    schedule: dict[str, Any] = {"kind": kind}
    if kind == "cron":
        schedule |= {"cron": form.get("cron", ""), "tz": form.get("tz") or "UTC"}
    elif kind == "every":
        schedule["every_seconds"] = _number(form.get("every_seconds", ""), "schedule.every_seconds")
    elif kind == "at":
        schedule["at"] = form.get("at", "")
    command = form.get("command", "")
    fields: dict[str, Any] = {
        "name": form.get("name", base.name if base else ""), "command": ["sh", "-c", command] if command else [],
        "schedule": schedule, "queue": form.get("queue") or "default", "priority": form.get("priority") or "normal"}
    if form.get("timeout_seconds"):
        fields["timeout_seconds"] = _number(form["timeout_seconds"], "timeout_seconds")
    if base is not None:
        merged = msgspec.to_builtins(base) | fields
        merged["name"] = base.name
        return decode_as(merged, JobSpec, "spec")
    if tenant is not None:
        fields["tenant"] = tenant
    return decode_as(fields, JobSpec, "spec")


def _number(text: str, field: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise InvalidSpec(field, text, "must be a number") from None


def _command_text(spec: JobSpec) -> str:
    """The command as the edit form shows it: the shell string when it is one."""
    if len(spec.command) == 3 and spec.command[:2] == ["sh", "-c"]:
        return spec.command[2]
    return " ".join(spec.command)


@post(f"{UI}/jobs", include_in_schema=False)
async def create_job(request: Request[Any, Any, Any]) -> Response[Any]:
    form = await _form(request)

    async def create(c: Client) -> str:
        record = await c.jobs.create(_spec_from_form(form, c.tenant))
        return f"{UI}/jobs/{quote(record.spec.key if c.tenant is None else record.spec.name)}"

    return await _act(request, f"{UI}/jobs", create)


@get(f"{UI}/jobs/{{name:str}}", include_in_schema=False)
async def job_page(request: Request[Any, Any, Any], name: str, cursor: str | None = None) -> Template:
    ctx = _context(request)
    c = ctx.client
    view = await c.jobs.get(name, count=10)
    runs = await c.runs.list(job=name, newest=True, limit=PAGE, cursor=cursor or None)
    spec = view.job.spec
    shown = present.set_fields(plain(spec))
    # Values of `env` are not shown (they may be credentials a job was given before secrets existed).
    if spec.env:
        shown["env"] = {k: "••••" for k in spec.env}
    calendars = [(field, n, ctx.calendar_ref(spec.tenant, n))
                 for field, names in (("exclude", spec.exclude_calendars), ("only", spec.only_calendars))
                 for n in names]
    return ctx.page("job.html", record=view.job, ref=name, spec=spec, calendars=calendars,
                    fires=present.fire_rows(spec.schedule, view.next_fires),
                    words=present.schedule_words(spec.schedule), spec_json=json.dumps(shown, indent=2),
                    runs=runs.items, next_cursor=runs.next_cursor, command=_command_text(spec),
                    has_flow=bool(spec.depends_on))


_ACTIONS = ("trigger", "pause", "resume", "delete", "backfill", "edit")


@post(f"{UI}/jobs/{{name:str}}/{{action:str}}", include_in_schema=False)
async def job_action(request: Request[Any, Any, Any], name: str, action: str) -> Response[Any]:
    back = f"{UI}/jobs/{quote(name)}"
    form = await _form(request)

    async def act(c: Client) -> str:
        if action == "trigger":
            run = await c.jobs.trigger(name)
            return f"{UI}/runs/{quote(run.run_id)}"
        if action == "pause":
            await c.jobs.pause(name)
            return "paused"
        if action == "resume":
            await c.jobs.resume(name)
            return "resumed"
        if action == "delete":
            await c.jobs.delete(name)
            return f"{UI}/jobs?done=deleted+{quote(name)}"
        if action == "backfill":
            made = await c.jobs.backfill(name, form.get("from", ""), form.get("to", ""))
            return f"backfilled {len(made.items)} runs"
        if action == "edit":
            current = (await c.jobs.get(name, count=0)).job
            version = int(_number(form.get("version", ""), "version"))
            await c.jobs.update(_spec_from_form(form, c.tenant, current.spec), expected_version=version,
                                apply_to_waiting=form.get("apply_to_waiting") == "1" or None)
            return "saved"
        raise InvalidSpec("action", action, f"must be one of {', '.join(_ACTIONS)}")

    return await _act(request, back, act)


# --- runs ----------------------------------------------------------------------------------------------------


@get(f"{UI}/runs/{{run_id:str}}", include_in_schema=False)
async def run_page(request: Request[Any, Any, Any], run_id: str) -> Template:
    ctx = _context(request)
    run = await ctx.client.runs.get(run_id)
    trace = ctx.trace_url.replace("{trace_id}", run.trace_id) if ctx.trace_url and run.trace_id else ""
    return ctx.page("run.html", run=run, job=ctx.job_of_run(run), trace=trace, duration=present.duration,
                    ended=RunState(run.state).terminal, timeline=present.timeline(run, datetime.now(UTC)))


@get(f"{UI}/runs/{{run_id:str}}/state", include_in_schema=False)
async def run_state(request: Request[Any, Any, Any], run_id: str) -> Template:
    """The run's state and why it waits: the fragment the run page polls while the run is live."""
    ctx = _context(request)
    run = await ctx.client.runs.get(run_id)
    return ctx.page("_run_state.html", run=run, ended=RunState(run.state).terminal)


@get(f"{UI}/runs/{{run_id:str}}/log", include_in_schema=False)
async def run_log(request: Request[Any, Any, Any], run_id: str) -> ServerSentEvent:
    """The run's output as server-sent events (`log`, JSON text) and one `end` with its final state."""
    ctx = _context(request)
    client = ctx.client
    await client.runs.get(run_id)  # a 404 before the stream starts, not inside it
    slot = ctx.gate.followers.take(ctx.who, "live output")

    async def events() -> AsyncIterator[ServerSentEventMessage]:
        async for chunk in client.follow_logs(run_id, through_api=True):
            yield ServerSentEventMessage(event="log", data=json.dumps(chunk.decode(errors="replace")))
        final = await client.runs.get(run_id)
        yield ServerSentEventMessage(event="end", data=json.dumps(str(final.state)))

    return ServerSentEvent(held(slot, events()))


@post(f"{UI}/runs/{{run_id:str}}/cancel", include_in_schema=False)
async def cancel_run(request: Request[Any, Any, Any], run_id: str) -> Response[Any]:
    async def cancel(c: Client) -> str:
        await c.runs.cancel(run_id, reason="cancelled from the dashboard")
        return "cancelled"

    return await _act(request, f"{UI}/runs/{quote(run_id)}", cancel)


@post(f"{UI}/runs/{{run_id:str}}/priority", include_in_schema=False)
async def set_run_priority(request: Request[Any, Any, Any], run_id: str) -> Response[Any]:
    """A waiting run moved to another priority (runs.set_priority): as the viewer, within its tenant's ceiling."""
    form = await _form(request)

    async def move(c: Client) -> str:
        run = await c.runs.set_priority(run_id, form.get("priority", ""))
        return f"priority {run.spec.priority if run.spec else ''}"

    return await _act(request, f"{UI}/runs/{quote(run_id)}", move)


# --- calendars -----------------------------------------------------------------------------------------------


@get(f"{UI}/calendars", include_in_schema=False)
async def calendars_page(request: Request[Any, Any, Any], cursor: str | None = None) -> Template:
    """The viewer's calendars (the admin: every tenant's), a cursor page of them."""
    ctx = _context(request)
    page = await ctx.client.calendars.list(cursor=cursor or None, limit=PAGE)
    rows = [{"record": r, "ref": ctx.ref(r.spec)} for r in page.items]
    return ctx.page("calendars.html", rows=rows, next_cursor=page.next_cursor)


@get(f"{UI}/calendars/{{name:str}}", include_in_schema=False)
async def calendar_page(request: Request[Any, Any, Any], name: str) -> Template:
    """One calendar in full, and the viewer's jobs that name it (another tenant's calendar: the API's 404)."""
    ctx = _context(request)
    c = ctx.client
    record = await c.calendars.get(name)
    jobs: list[JobRecord] = []
    cursor: str | None = None
    # The jobs the viewer can see, read in pages as the jobs page's search reads them and bounded the same way
    # (a job's record does not index its calendars, so finding its users is a scan of the list).
    for _ in range(SEARCH_PAGES):
        page = await c.jobs.list(cursor=cursor, limit=500)
        jobs.extend(page.items)
        cursor = page.next_cursor
        if not cursor:
            break
    uses = [{"job": job, "ref": ctx.ref(job.spec), "where": where}
            for job, where in present.calendar_uses(record.spec, jobs)]
    return ctx.page("calendar.html", record=record, spec=record.spec, uses=uses, read=len(jobs),
                    partial=cursor is not None)


# --- flows, agents, dead letters, tenants --------------------------------------------------------------------


@get(f"{UI}/flows/{{name:str}}", include_in_schema=False)
async def flow_page(request: Request[Any, Any, Any], name: str) -> Template:
    """The jobs connected to `name` by dependencies, each coloured by its latest run."""
    ctx = _context(request)
    c = ctx.client
    records: list[JobRecord] = []
    cursor: str | None = None
    while True:
        page = await c.jobs.list(cursor=cursor, limit=1000)
        records.extend(page.items)
        cursor = page.next_cursor
        if not cursor:
            break
    graph = _graph(ctx, records)
    if name not in graph:
        await c.jobs.get(name, count=0)  # not found: the API's 404
    part = _component(graph, name)
    # Each job's run written last (its most recent activity): one read per job, however long its history.
    latest = dict(zip(part, await asyncio.gather(*(c.runs.latest(job) for job in part)), strict=True))
    states = {job: str(run.state) for job, run in latest.items() if run is not None}
    links = {job: f"{UI}/runs/{quote(run.run_id)}" if run is not None else f"{UI}/jobs/{quote(job)}"
             for job, run in latest.items()}
    sub = {job: [u for u in graph.get(job, []) if u in part] for job in part}
    blocked = sorted(job for job, state in states.items() if state == RunState.BLOCKED)
    return ctx.page("flow.html", name=name, svg=present.dag_svg(sub, states, links), states=states,
                    blocked=blocked)


def _graph(ctx: Context, records: list[JobRecord]) -> dict[str, list[str]]:
    graph: dict[str, list[str]] = {}
    for record in records:
        spec = record.spec
        graph[ctx.ref(spec)] = spec.upstream_keys() if ctx.who.tenant is None else list(spec.depends_on)
    return graph


def _component(graph: dict[str, list[str]], name: str) -> list[str]:
    """Every job linked to `name` through dependencies, either way."""
    links: dict[str, set[str]] = {}
    for job, ups in graph.items():
        for up in ups:
            links.setdefault(job, set()).add(up)
            links.setdefault(up, set()).add(job)
    seen, todo = {name}, [name]
    while todo:
        for other in links.get(todo.pop(), ()):
            if other not in seen:
                seen.add(other)
                todo.append(other)
    return sorted(seen)


@get(f"{UI}/agents", include_in_schema=False)
async def agents_page(request: Request[Any, Any, Any], cursor: str | None = None) -> Template:
    """A cursor page of the agents by id (10,000 agents are 10,000 records: the page reads its own)."""
    ctx = _context(request)
    now = datetime.now(UTC)
    found = await _tolerant(ctx.client.agents.list(cursor=cursor or None, limit=PAGE))
    rows = []
    if not isinstance(found, ApiError):
        for a in found.items:
            cpu_used = a.cpu - (a.free_cpu if a.free_cpu is not None else a.cpu)
            mem_used = a.memory_mb - (a.free_memory_mb if a.free_memory_mb is not None else a.memory_mb)
            gpu_used = a.gpus - (a.free_gpus if a.free_gpus is not None else a.gpus)
            bars = [("cpu", round(cpu_used, 2), a.cpu), ("memory MiB", mem_used, a.memory_mb)]
            if a.gpus:
                bars.append(("GPUs", gpu_used, a.gpus))
            if a.slots:
                bars.append(("slots", a.running, a.slots))
            rows.append({"agent": a, "bars": present.hbars(bars),
                         "age": present.duration((now - a.heartbeat_at).total_seconds())})
    return ctx.page("agents.html", rows=rows, denied=found if isinstance(found, ApiError) else None,
                    next_cursor=None if isinstance(found, ApiError) else found.next_cursor)


@get(f"{UI}/dlq", include_in_schema=False)
async def dlq_page(request: Request[Any, Any, Any]) -> Template:
    ctx = _context(request)
    page = await ctx.client.dlq.list(limit=500)
    # A replay that died too is a row of its own beside its original: each names its run, and a replay its original
    return ctx.page("dlq.html", runs=list(reversed(page.items)), job_of=ctx.job_of_run, replay_of=replay_of,
                    stamp_of=stamp_of)


@post(f"{UI}/dlq/{{run_id:str}}/replay", include_in_schema=False)
async def replay(request: Request[Any, Any, Any], run_id: str) -> Response[Any]:
    async def again(c: Client) -> str:
        run = await c.dlq.replay(run_id)
        return f"{UI}/runs/{quote(run.run_id)}"

    return await _act(request, f"{UI}/dlq", again)


@get(f"{UI}/tenants", include_in_schema=False)
async def tenants_page(request: Request[Any, Any, Any]) -> Template:
    ctx = _context(request)
    found = await _tolerant(ctx.client.tenants.list())
    use: dict[str, dict[str, float]] = {}
    if not isinstance(found, ApiError):
        running = await _tolerant(ctx.client.runs.list(state=RunState.RUNNING, limit=1000))
        if not isinstance(running, ApiError):
            for run in running.items:
                spent = use.setdefault(run.tenant, {"cpu": 0.0, "memory_mb": 0.0, "gpus": 0.0, "runs": 0.0})
                resources = run.spec.resources if run.spec else None
                spent["runs"] += 1
                if resources is not None:
                    spent["cpu"] += resources.cpu
                    spent["memory_mb"] += resources.memory_mb
                    spent["gpus"] += resources.gpus
    return ctx.page("tenants.html", tenants=[] if isinstance(found, ApiError) else found.items, use=use,
                    denied=found if isinstance(found, ApiError) else None)


ROUTES: list[Any] = [login_page, login, logout, overview, jobs_page, create_job, job_page, job_action, run_page,
                     run_state, run_log, cancel_run, set_run_priority, calendars_page, calendar_page, flow_page,
                     agents_page, dlq_page, replay, tenants_page]

__all__ = ["ROUTES"]

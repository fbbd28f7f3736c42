"""The jobs pages and their actions (create, trigger, pause, resume, delete, backfill, edit), and a job's flow."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

import msgspec
from litestar import Request, Response, get, post
from litestar.response import Template

from jetcron.core.errors import InvalidSpec
from jetcron.core.lifecycle.run_state import RunState
from jetcron.core.models import JobRecord, JobSpec
from jetcron.core.validate import decode_as
from jetcron.sdk.client import Client
from jetcron.wire.codec import plain
from jetcron_services.gateway.ui import present
from jetcron_services.gateway.ui.pages._kit import PAGE, SEARCH_PAGES, Context, page_context, read_form, run_action
from jetcron_services.gateway.ui.session import UI

GRID_RUNS = 12


@get(f"{UI}/jobs", include_in_schema=False)
async def jobs_page(request: Request[Any, Any, Any], queue: str | None = None, q: str | None = None,
                    cursor: str | None = None, status: str | None = None) -> Template:
    ctx = page_context(request)
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
    form = await read_form(request)

    async def create(c: Client) -> str:
        record = await c.jobs.create(_spec_from_form(form, c.tenant))
        return f"{UI}/jobs/{quote(record.spec.key if c.tenant is None else record.spec.name)}"

    return await run_action(request, f"{UI}/jobs", create)


@get(f"{UI}/jobs/{{name:str}}", include_in_schema=False)
async def job_page(request: Request[Any, Any, Any], name: str, cursor: str | None = None) -> Template:
    ctx = page_context(request)
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
    form = await read_form(request)

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

    return await run_action(request, back, act)


@get(f"{UI}/flows/{{name:str}}", include_in_schema=False)
async def flow_page(request: Request[Any, Any, Any], name: str) -> Template:
    """The jobs connected to `name` by dependencies, each coloured by its latest run."""
    ctx = page_context(request)
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

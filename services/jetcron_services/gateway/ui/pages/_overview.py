"""The login and logout pages, and the overview: the cluster's state at a glance."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

from litestar import Request, Response, get, post
from litestar.response import Redirect, Template

from jetcron.core.lifecycle.finished import dense
from jetcron.core.lifecycle.run_state import RunState
from jetcron.sdk.errors import ApiError
from jetcron.wire.api import ClusterStatus
from jetcron_services.gateway.gate import gate_of
from jetcron_services.gateway.ui import present
from jetcron_services.gateway.ui.pages._kit import Context, page_context, read_form, tolerant
from jetcron_services.gateway.ui.session import (
    UI,
    changer,
    check_token,
    cross_origin,
    end_session,
    safe_next,
    session_cookie,
)

OVERVIEW_JOBS = 200
OVERVIEW_MINUTES = 60


@get(f"{UI}/login", include_in_schema=False)
async def login_page(next_page: str | None = None) -> Template:
    return Template(template_name="login.html", context={"next": safe_next(next_page), "error": ""})


@post(f"{UI}/login", include_in_schema=False)
async def login(request: Request[Any, Any, Any]) -> Response[Any]:
    form = await read_form(request)
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
    ctx = page_context(request)
    c = ctx.client
    now = datetime.now(UTC)
    states = (RunState.WAITING, RunState.SCHEDULED, RunState.ASSIGNED, RunState.RUNNING, RunState.RETRY_WAIT)
    listed = asyncio.gather(*(tolerant(c.runs.list(state=state, limit=1000)) for state in states))
    jobs, dead, finished, cluster, pages = await asyncio.gather(
        c.jobs.list(limit=OVERVIEW_JOBS), tolerant(c.dlq.list(limit=1000)),
        tolerant(c.runs.finished(minutes=OVERVIEW_MINUTES)), _cluster(ctx), listed)
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
    return await tolerant(ctx.client.cluster.status()) if ctx.who.tenant is None else None

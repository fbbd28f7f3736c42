"""Job routes: the design's four calls, and pause, resume, trigger, delete, update, backfill, preview."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import datetime
from typing import Annotated, Any

import msgspec
from litestar import Request, Response, delete, get, patch, post
from litestar.params import Parameter

from jetcron.auth.tokens import TokenRecord
from jetcron.core import cron
from jetcron.core.errors import InvalidSpec
from jetcron.core.models import RunState, Schedule
from jetcron.core.validate import decode_as
from jetcron.services.gateway.design import (
    Created,
    CreateJob,
    JobPage,
    JobStatusView,
    job_spec,
    job_status,
)
from jetcron.services.gateway.gate import API, Gate, HttpProblem
from jetcron.services.gateway.gate import who as _who
from jetcron.services.gateway.problems import problem

TERMINAL = {st.value for st in RunState if st.terminal}


async def _latest_run(gate: Gate, who: TokenRecord, job: str) -> dict[str, Any] | None:
    """The job's newest run: run ids sort by their occurrence's instant (ids.run_id)."""
    cursor: str | None = None
    last: dict[str, Any] | None = None
    while True:
        page = await gate.call(who, "runs.list", {"job": job, "limit": 1000, **({"cursor": cursor} if cursor else {})})
        if page["items"]:
            last = page["items"][-1]
        cursor = page.get("next_cursor")
        if not cursor:
            return last


async def _runs_of(gate: Gate, who: TokenRecord, job: str) -> AsyncIterator[dict[str, Any]]:
    cursor: str | None = None
    while True:
        page = await gate.call(who, "runs.list", {"job": job, "limit": 1000, **({"cursor": cursor} if cursor else {})})
        for item in page["items"]:
            yield item
        cursor = page.get("next_cursor")
        if not cursor:
            return


@post(f"{API}/jobs", status_code=201, summary="Create a job",
      description="The design's body; `Idempotency-Key` makes a retried create return the same job.")
async def create_job(request: Request[Any, Any, Any], data: CreateJob) -> Created:
    gate, who = await _who(request)
    payload: dict[str, Any] = {"spec": job_spec(data)}
    if key := request.headers.get("idempotency-key"):
        payload["idempotency_key"] = key
    await gate.call(who, "jobs.create", payload)
    # The body names no tenant: the admin's jobs go to the default tenant, whose keys are bare names.
    return Created(job_id=data.name, status="queued")


@get(f"{API}/jobs/{{job_id:str}}", summary="A job and its latest run")
async def get_job(request: Request[Any, Any, Any], job_id: str) -> JobStatusView:
    gate, who = await _who(request)
    view = await gate.call(who, "jobs.get", {"name": job_id})
    return job_status(view["job"], await _latest_run(gate, who, job_id), who.tenant)


@get(f"{API}/jobs", summary="List jobs (filter by queue and latest status; cursor pagination)")
async def list_jobs(request: Request[Any, Any, Any], queue: str | None = None, status: str | None = None,
                    cursor: str | None = None, limit: int = 50) -> JobPage:
    gate, who = await _who(request)
    payload: dict[str, Any] = {"limit": limit}
    if queue is not None:
        payload["queue"] = queue
    if cursor is not None:
        payload["cursor"] = cursor
    page = await gate.call(who, "jobs.list", payload)
    views = await asyncio.gather(*(_view(gate, who, job) for job in page["items"]))
    return JobPage(items=[v for v in views if status is None or v.status == status],
                   next_cursor=page.get("next_cursor"))


async def _view(gate: Gate, who: TokenRecord, job: dict[str, Any]) -> JobStatusView:
    shown = job_status(job, None, who.tenant)
    return job_status(job, await _latest_run(gate, who, shown.job_id), who.tenant)


@post(f"{API}/jobs/{{job_id:str}}/cancel", status_code=200, summary="Cancel every unfinished run of the job")
async def cancel_job(request: Request[Any, Any, Any], job_id: str) -> dict[str, Any]:
    gate, who = await _who(request)
    await gate.call(who, "jobs.get", {"name": job_id})  # a 404 for a job the caller cannot see
    cancelled = []
    async for run in _runs_of(gate, who, job_id):
        if run["state"] not in TERMINAL:
            await gate.call(who, "runs.cancel", {"run_id": run["run_id"], "reason": "cancelled through the REST API"})
            cancelled.append(run["run_id"])
    return {"job_id": job_id, "cancelled": cancelled}


def _verb_route(path: str, verb: str, summary: str) -> Any:
    @post(f"{API}/jobs/{{job_id:str}}/{path}", status_code=200, summary=summary, name=f"job_{path}")
    async def route(request: Request[Any, Any, Any], job_id: str) -> Any:
        gate, who = await _who(request)
        payload: dict[str, Any] = {"name": job_id}
        if verb == "jobs.trigger" and (key := request.headers.get("idempotency-key")):
            payload["key"] = key
        return await gate.call(who, verb, payload)

    return route


@delete(f"{API}/jobs/{{job_id:str}}", status_code=200, summary="Delete a job (its runs are kept)")
async def delete_job(request: Request[Any, Any, Any], job_id: str) -> Any:
    gate, who = await _who(request)
    return await gate.call(who, "jobs.delete", {"name": job_id})


@get(f"{API}/jobs/{{job_id:str}}/spec", summary="A job's full spec and version (the ETag for PATCH's If-Match)")
async def get_spec(request: Request[Any, Any, Any], job_id: str,
                   count: Annotated[int, Parameter(ge=0, le=100)] = 10) -> Response[dict[str, Any]]:
    gate, caller = await _who(request)
    view = await gate.call(caller, "jobs.get", {"name": job_id, "count": count})
    job = view["job"]
    return Response({"spec": job["spec"], "version": job["version"], "status": job["status"],
                     "next_fires": view["next_fires"]}, headers={"ETag": f'"{job["version"]}"'})


@patch(f"{API}/jobs/{{job_id:str}}", summary="Change a job: a JSON merge patch (RFC 7396) of its spec",
       description="`If-Match` names the version read (GET .../spec gives it as the ETag): a job changed since is "
                   "409, nothing written. The name and tenant cannot change.")
async def patch_job(request: Request[Any, Any, Any], job_id: str, data: dict[str, Any]) -> Any:
    gate, caller = await _who(request)
    expected = _version(request.headers.get("if-match"))
    job = (await gate.call(caller, "jobs.get", {"name": job_id, "count": 0}))["job"]
    spec = merge_patch(job["spec"], data)
    for fixed in ("name", "tenant"):
        if spec.get(fixed) != job["spec"].get(fixed):
            raise HttpProblem(problem(422, f"a job's {fixed} cannot change (create another job)", code="invalid",
                                      field=fixed, value=str(spec.get(fixed))[:200]))
    return await gate.call(caller, "jobs.update", {"spec": spec, "expected_version": expected})


def _version(header: str | None) -> int:
    """If-Match: "3" (or W/"3", or 3): the version the caller read."""
    value = (header or "").strip().removeprefix("W/").strip('"')
    if not value.isdigit() or not 0 < int(value) < 2**53:
        raise HttpProblem(problem(428, "If-Match with the job's version is required (GET .../spec gives it as "
                                  "the ETag): a change must not undo one made since it was read",
                                  code="invalid", field="If-Match", value=(header or "")[:40]))
    return int(value)


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7396: objects merge key by key, null removes a key, anything else replaces."""
    if not isinstance(patch, dict):
        return patch
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


class Backfill(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    start: str = msgspec.field(name="from")
    """The first instant (ISO 8601 with its offset)."""
    end: str = msgspec.field(name="to")
    limit: int = 1000
    rate: int = 100
    """Runs started per second, at most."""


@post(f"{API}/jobs/{{job_id:str}}/backfill", status_code=200, summary="Run a job's occurrences in [from, to)")
async def backfill(request: Request[Any, Any, Any], job_id: str, data: Backfill) -> Any:
    gate, caller = await _who(request)
    return await gate.call(caller, "jobs.backfill", {"name": job_id, "from": data.start, "to": data.end,
                                                     "limit": data.limit, "rate": data.rate})


@get(f"{API}/schedule/preview", summary="The next fire times of a schedule (the trigger's own code)")
async def preview(request: Request[Any, Any, Any], start: Annotated[str, Parameter(query="from")],
                  cron_expr: Annotated[str | None, Parameter(query="cron")] = None, every_seconds: float | None = None,
                  tz: Annotated[str, Parameter(query="timezone")] = "UTC", on_gap: str = "shift",
                  on_fold: str = "first",
                  count: Annotated[int, Parameter(ge=1, le=1000)] = 10) -> list[dict[str, str | None]]:
    await _who(request)
    try:
        after = datetime.fromisoformat(start.replace("Z", "+00:00"))
        if after.tzinfo is None:
            raise ValueError("no UTC offset")
    except ValueError:
        raise HttpProblem(problem(422, "from must be an ISO 8601 instant with its offset", code="invalid",
                                  field="from", value=start[:64])) from None
    if (cron_expr is None) == (every_seconds is None):
        raise HttpProblem(problem(422, "give exactly one of cron or every_seconds", code="invalid", field="cron"))
    raw: dict[str, Any] = ({"kind": "cron", "cron": cron_expr} if cron_expr is not None else
                           {"kind": "every", "every_seconds": every_seconds, "anchor": after.isoformat()})
    try:
        schedule = decode_as({**raw, "tz": tz, "on_gap": on_gap, "on_fold": on_fold}, Schedule, "schedule")
        cron.validate_schedule(schedule, created_at=after)
    except InvalidSpec as exc:
        field = "timezone" if exc.field == "schedule.tz" else exc.field.removeprefix("schedule.")
        raise HttpProblem(problem(422, str(exc), code="invalid", field=field, value=str(exc.value)[:200])) from None
    return cron.preview(schedule, after, count)


ROUTES: list[Any] = [
    create_job, get_job, list_jobs, cancel_job, delete_job, get_spec, patch_job, backfill, preview,
    _verb_route("pause", "jobs.pause", "Pause a job (no new occurrences fire)"),
    _verb_route("resume", "jobs.resume", "Resume a paused job"),
    _verb_route("trigger", "jobs.trigger", "Run a job now (Idempotency-Key names the run)"),
]

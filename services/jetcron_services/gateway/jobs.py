"""Job routes: the design's four calls, and pause, resume, trigger, delete, update, backfill, preview."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import datetime
from typing import Annotated, Any

import msgspec
from litestar import Request, delete, get, patch, post
from litestar.params import Parameter

from jetcron.core.errors import InvalidSpec
from jetcron.core.models import JobRecord, Run, Schedule
from jetcron.core.timing import cron, exclusions
from jetcron.core.validate import decode_as
from jetcron.sdk.client import Client
from jetcron.wire.api import FireTime, Page
from jetcron.wire.codec import plain
from jetcron_services.gateway import status as words
from jetcron_services.gateway.calendars import named_calendars
from jetcron_services.gateway.design import Created, CreateJob, JobPage, JobStatusView, job_spec, job_status, rest_field
from jetcron_services.gateway.design import job_id as design_job_id
from jetcron_services.gateway.gate import (
    API,
    HttpProblem,
    WholeResponse,
    idempotency_key,
    integral,
    own_tenant,
    public_base,
    strict_body,
    version_of,
)
from jetcron_services.gateway.gate import who as _who
from jetcron_services.gateway.listing import jobs_page, latest_run
from jetcron_services.gateway.problems import problem


async def _runs_of(c: Client, job: str) -> AsyncIterator[Run]:
    """Every run of a job, oldest first (run ids sort by their occurrence's instant: ids.run_id)."""
    cursor: str | None = None
    while True:
        page = await c.runs.list(job=job, limit=1000, cursor=cursor)
        for run in page.items:
            yield run
        cursor = page.next_cursor
        if not cursor:
            return


@post(f"{API}/jobs", status_code=201, summary="Create a job",
      description="The design's body, or any field of jetcron's job spec (docs/rest-api.md, \"The body\"); the "
                  "reply carries the submit-time warnings. `Idempotency-Key` makes a retried create return the same "
                  "job.")
async def create_job(request: Request[Any, Any, Any], data: dict[str, Any]) -> WholeResponse[Created]:
    gate, caller = await _who(request)
    body = strict_body(data, CreateJob)
    own_tenant(caller, body.tenant)
    key = idempotency_key(request)
    try:
        spec = job_spec(body)
    except InvalidSpec as exc:
        raise HttpProblem(problem(422, str(exc), code="invalid", field=exc.field,
                                  value=str(exc.value)[:200])) from None
    record = await gate.api(caller, lambda c: c.jobs.create(spec, idempotency_key=key),
                            fields=lambda field: rest_field(field, body))
    job_id = design_job_id(record, caller.tenant)
    return WholeResponse(Created(job_id=job_id, status=words.NOT_RUN, warnings=record.warnings), status_code=201,
                    headers={"Location": f"{API}/jobs/{job_id}"})


@get(f"{API}/jobs/{{job_id:str}}", summary="A job and its latest run")
async def get_job(request: Request[Any, Any, Any], job_id: str) -> JobStatusView:
    gate, caller = await _who(request)
    base = public_base(request)

    async def view(c: Client) -> JobStatusView:
        job = (await c.jobs.get(job_id, count=0)).job
        return job_status(job, await latest_run(c, job_id), caller.tenant, base=base)

    return await gate.api(caller, view)


# The routes' OpenAPI is the contract's (gateway.contract): a handler's signature only parses and checks its input.
@get(f"{API}/jobs", summary="List jobs (filter by queue and status; cursor pagination)")
async def list_jobs(request: Request[Any, Any, Any], queue: str | None = None, status: str | None = None,
                    cursor: str | None = None, limit: Annotated[int, Parameter(ge=1, le=1000)] = 50) -> JobPage:
    gate, caller = await _who(request)
    wanted = None if status is None else words.job_filter(status)
    if status is not None and wanted is None:
        raise HttpProblem(words.unknown("status", status, words.JOB_WORDS))
    base = public_base(request)
    return await gate.api(caller, lambda c: jobs_page(c, wanted, tenant=caller.tenant, base=base, queue=queue,
                                                      cursor=cursor, limit=limit))


class Cancelled(msgspec.Struct, kw_only=True):
    job_id: str
    cancelled: list[str]
    """The runs cancelled (those not yet ended)."""


@post(f"{API}/jobs/{{job_id:str}}/cancel", status_code=200, summary="Cancel every unfinished run of the job")
async def cancel_job(request: Request[Any, Any, Any], job_id: str) -> Cancelled:
    gate, caller = await _who(request)

    async def cancel(c: Client) -> Cancelled:
        await c.jobs.get(job_id, count=0)  # a 404 for a job the caller cannot see
        done = [run.run_id async for run in _runs_of(c, job_id) if not run.state.terminal]
        for run_id in done:
            await c.runs.cancel(run_id, reason="cancelled through the REST API")
        return Cancelled(job_id=job_id, cancelled=done)

    return await gate.api(caller, cancel)


@post(f"{API}/jobs/{{job_id:str}}/pause", status_code=200, summary="Pause a job (no new occurrences fire)")
async def pause_job(request: Request[Any, Any, Any], job_id: str) -> JobRecord:
    gate, caller = await _who(request)
    return await gate.api(caller, lambda c: c.jobs.pause(job_id))


@post(f"{API}/jobs/{{job_id:str}}/resume", status_code=200, summary="Resume a paused job")
async def resume_job(request: Request[Any, Any, Any], job_id: str) -> JobRecord:
    gate, caller = await _who(request)
    return await gate.api(caller, lambda c: c.jobs.resume(job_id))


@post(f"{API}/jobs/{{job_id:str}}/trigger", status_code=200,
      summary="Run a job now (Idempotency-Key names the run: a retry starts no second one)")
async def trigger_job(request: Request[Any, Any, Any], job_id: str) -> Run:
    gate, caller = await _who(request)
    key = idempotency_key(request)
    return await gate.api(caller, lambda c: c.jobs.trigger(job_id, key=key))


@delete(f"{API}/jobs/{{job_id:str}}", status_code=200, summary="Delete a job (its runs are kept)")
async def delete_job(request: Request[Any, Any, Any], job_id: str) -> JobRecord:
    gate, caller = await _who(request)
    return await gate.api(caller, lambda c: c.jobs.delete(job_id))


class SpecView(msgspec.Struct, kw_only=True):
    spec: dict[str, Any]
    """The job's spec as jetcron stores it (schemas/JobSpec.json): what PATCH merges into."""
    version: int
    status: str
    next_fires: list[FireTime]


@get(f"{API}/jobs/{{job_id:str}}/spec", summary="A job's full spec and version (the ETag for PATCH's If-Match)")
async def get_spec(request: Request[Any, Any, Any], job_id: str,
                   count: Annotated[int, Parameter(ge=0, le=100)] = 10) -> WholeResponse[SpecView]:
    gate, caller = await _who(request)
    view = await gate.api(caller, lambda c: c.jobs.get(job_id, count=count))
    job = view.job
    return WholeResponse(SpecView(spec=plain(job.spec), version=job.version, status=job.status.value,
                             next_fires=view.next_fires), headers={"ETag": f'"{job.version}"'})


@patch(f"{API}/jobs/{{job_id:str}}", summary="Change a job: a JSON merge patch (RFC 7396) of its spec",
       description="`If-Match` names the version read (GET .../spec gives it as the ETag): a job changed since is "
                   "409, nothing written. The name and tenant cannot change.")
async def patch_job(request: Request[Any, Any, Any], job_id: str, data: dict[str, Any],
                    apply_to_waiting: bool = False) -> WholeResponse[JobRecord]:
    gate, caller = await _who(request)
    expected = _version(request.headers.get("if-match"))

    async def change(c: Client) -> JobRecord:
        old: dict[str, Any] = plain((await c.jobs.get(job_id, count=0)).job.spec)
        spec = merge_patch(old, integral(data))
        for fixed in ("name", "tenant"):
            if spec.get(fixed) != old.get(fixed):
                raise HttpProblem(problem(422, f"a job's {fixed} cannot change (create another job)",
                                          code="invalid", field=fixed, value=str(spec.get(fixed))[:200]))
        return await c.jobs.update(spec, expected_version=expected, apply_to_waiting=apply_to_waiting or None)

    record = await gate.api(caller, change, fields=_spec_field)
    return WholeResponse(record, headers={"ETag": f'"{record.version}"'})


def _spec_field(field: str | None) -> str | None:
    """A field of the merged spec the API named (`spec.x` for one it does not know) as the patch names it."""
    return field.removeprefix("spec.") if field else field


def _version(header: str | None) -> int:
    """The version the caller read, which a PATCH must name."""
    version = version_of(header)
    if version is None:
        raise HttpProblem(problem(428, "If-Match with the job's version is required (GET .../spec gives it as "
                                  "the ETag): a change must not undo one made since it was read",
                                  code="invalid", field="If-Match", value=(header or "")[:40]))
    return version


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
async def backfill(request: Request[Any, Any, Any], job_id: str, data: dict[str, Any]) -> Page[Run]:
    gate, caller = await _who(request)
    body = strict_body(data, Backfill)
    return await gate.api(caller, lambda c: c.jobs.backfill(job_id, body.start, body.end, limit=body.limit,
                                                             rate=body.rate),
                          fields=lambda field: _BACKFILL_FIELDS.get(field or "", field))


_BACKFILL_FIELDS = {"backfill": "to", "backfill.start": "from", "backfill.end": "to", "backfill.rate": "rate"}
"""The API's names for a backfill's range (`backfill`: the range as a whole, which `to` ends) as the body names
them."""


@get(f"{API}/schedule/preview", summary="The next fire times of a schedule (the trigger's own code)")
async def preview(request: Request[Any, Any, Any], start: Annotated[str, Parameter(query="from")],
                  cron_expr: Annotated[str | None, Parameter(query="cron")] = None, every_seconds: float | None = None,
                  tz: Annotated[str, Parameter(query="timezone")] = "UTC", on_gap: str = "shift",
                  on_fold: str = "first", count: Annotated[int, Parameter(ge=1, le=1000)] = 10,
                  exclude: str | None = None, only: str | None = None) -> list[dict[str, str | None]]:
    gate, caller = await _who(request)
    try:
        after = datetime.fromisoformat(start.replace("Z", "+00:00"))
        if after.tzinfo is None:
            raise ValueError("no UTC offset")
    except ValueError:
        raise HttpProblem(problem(422, "from must be an ISO 8601 instant with its offset", code="invalid",
                                  field="from", value=start[:64])) from None
    if (cron_expr is None) == (every_seconds is None):
        got = "neither" if cron_expr is None else f"both: every_seconds={every_seconds:g}"
        raise HttpProblem(problem(422, f"cron: give exactly one of cron and every_seconds (got {got})",
                                  code="invalid", field="cron", value=cron_expr and cron_expr[:200]))
    raw: dict[str, Any] = ({"kind": "cron", "cron": cron_expr} if cron_expr is not None else
                           {"kind": "every", "every_seconds": every_seconds, "anchor": after.isoformat()})
    try:
        schedule = decode_as({**raw, "tz": tz, "on_gap": on_gap, "on_fold": on_fold}, Schedule, "schedule")
        cron.validate_schedule(schedule, created_at=after)
    except InvalidSpec as exc:
        field = _PREVIEW_FIELDS.get(exc.field, exc.field.removeprefix("schedule."))
        raise HttpProblem(problem(422, str(exc), code="invalid", field=field, value=str(exc.value)[:200])) from None
    calendars = None
    if exclude or only:
        calendars = await gate.api(caller, lambda c: named_calendars(c, exclude or "", only or ""))
    return exclusions.preview(schedule, after, count, calendars=calendars)


_PREVIEW_FIELDS = {"schedule.tz": "timezone", "created_at": "from", "schedule.anchor": "from"}
"""The schedule's fields as the preview's parameters name them (its start is `from`, which the interval counts
from)."""

ROUTES: list[Any] = [create_job, get_job, list_jobs, cancel_job, pause_job, resume_job, trigger_job, delete_job,
                     get_spec, patch_job, backfill, preview]



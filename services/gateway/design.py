"""The REST API's shapes (the design's, as written) and their translation to and from jetcron's. Pure.

`POST /api/v1/jobs` takes the design's body: `command` a string (run by `sh -c`) or an argv list, `schedule` a
cron expression (in `timezone`), an ISO 8601 instant (once, then), or absent (now); `resources.memory_gb`;
`retry_policy: {max_retries, backoff}`. A job's status is its latest run's (docs/rest-api.md).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

import msgspec

from jetcron.core.models import JobRecord, JobStatus, NotifyRule, Priority, Run, RunState


class _Body(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    pass


class ResourcesBody(_Body, kw_only=True):
    cpu: float = 0.1
    memory_gb: float = 0.0625
    gpus: int = 0


class RetryPolicyBody(_Body, kw_only=True):
    max_retries: int = 2
    """Attempts after the first."""
    backoff: Literal["exponential", "fixed"] = "exponential"
    initial_seconds: float = 1.0


class CreateJob(_Body, kw_only=True):
    name: str
    command: str | list[str]
    resources: ResourcesBody = msgspec.field(default_factory=ResourcesBody)
    priority: Priority = Priority.NORMAL
    queue: str = "default"
    schedule: str | None = None
    """A cron expression, an ISO 8601 instant with its offset (run once then), or absent (run now)."""
    timezone: str = "UTC"
    """The cron expression's time zone (IANA name)."""
    retry_policy: RetryPolicyBody = msgspec.field(default_factory=RetryPolicyBody)
    depends_on: list[str] = msgspec.field(default_factory=list)
    timeout_seconds: float | None = None
    env: dict[str, str] = msgspec.field(default_factory=dict)
    secrets: list[str] = msgspec.field(default_factory=list)
    notify: list[NotifyRule] = msgspec.field(default_factory=list)
    """Who hears about the job's runs (docs/notifications.md)."""
    start_deadline_seconds: float | None = None
    finish_deadline_seconds: float | None = None


class Created(msgspec.Struct, kw_only=True):
    job_id: str
    status: str


class JobStatusView(msgspec.Struct, kw_only=True):
    job_id: str
    status: str
    """The latest run's state (`queued` until it is placed), or `queued`/`paused` before the first run."""
    machine_id: str | None
    started_at: str | None
    logs_url: str | None
    attempts: int
    run_id: str | None
    queue: str
    paused: bool
    version: int
    exit_code: int | None = None
    finished_at: str | None = None
    reason: str = ""


class JobPage(msgspec.Struct, kw_only=True):
    items: list[JobStatusView]
    next_cursor: str | None


def _schedule(body: CreateJob) -> dict[str, Any]:
    if body.schedule is None:
        return {"kind": "now"}
    try:
        instant = datetime.fromisoformat(body.schedule.replace("Z", "+00:00"))
    except ValueError:
        return {"kind": "cron", "cron": body.schedule, "tz": body.timezone}
    return {"kind": "at", "at": instant.isoformat(), "tz": body.timezone}


def job_spec(body: CreateJob) -> dict[str, Any]:
    """The API's job spec for the design's body (the API validates it and names the field that fails)."""
    command = ["sh", "-c", body.command] if isinstance(body.command, str) else body.command
    spec: dict[str, Any] = {
        "name": body.name, "command": command, "priority": body.priority.value, "queue": body.queue,
        "schedule": _schedule(body), "depends_on": body.depends_on, "env": body.env, "secrets": body.secrets,
        "resources": {"cpu": body.resources.cpu, "memory_mb": max(1, round(body.resources.memory_gb * 1024)),
                      "gpus": body.resources.gpus},
        "retry": {"max_attempts": body.retry_policy.max_retries + 1,
                  "initial_seconds": body.retry_policy.initial_seconds,
                  "multiplier": 2.0 if body.retry_policy.backoff == "exponential" else 1.0},
    }
    for key in ("timeout_seconds", "start_deadline_seconds", "finish_deadline_seconds"):
        if getattr(body, key) is not None:
            spec[key] = getattr(body, key)
    if body.notify:
        spec["notify"] = msgspec.to_builtins(body.notify)
    return spec


# The API names the fields of its own spec (decode errors prefix them with `spec.`); a REST caller sent the
# design's.
_FIELDS = {"resources.memory_mb": "resources.memory_gb", "retry.max_attempts": "retry_policy.max_retries",
           "retry.multiplier": "retry_policy.backoff", "retry.initial_seconds": "retry_policy.initial_seconds",
           "schedule.tz": "timezone", "schedule": "schedule"}


def rest_field(field: str | None) -> str | None:
    """The design's name for a field the API named in its own spec's terms."""
    if field is None:
        return None
    field = field.removeprefix("spec.")
    for ours, theirs in _FIELDS.items():
        if field == ours or field.startswith(ours + "."):
            return theirs
    return field


def job_id(job: JobRecord, tenant: str | None) -> str:
    """How the caller names the job: a tenant by its name, the admin by its key (ids.job_key)."""
    return job.spec.name if tenant is not None else job.spec.key


def job_status(job: JobRecord, run: Run | None, tenant: str | None) -> JobStatusView:
    """The design's job view: the job with its latest run."""
    paused = job.status is JobStatus.PAUSED
    if run is None:
        status = "paused" if paused else "queued"
    else:
        status = "queued" if run.state is RunState.SCHEDULED else run.state.value
    return JobStatusView(
        job_id=job_id(job, tenant), status=status, machine_id=run.agent if run else None,
        started_at=run.started_at.isoformat() if run and run.started_at else None,
        logs_url=f"/api/v1/runs/{run.run_id}/logs" if run else None, attempts=run.attempt if run else 0,
        run_id=run.run_id if run else None, queue=job.spec.queue, paused=paused, version=job.version,
        exit_code=run.exit_code if run else None,
        finished_at=run.finished_at.isoformat() if run and run.finished_at else None,
        reason=run.reason if run else "")

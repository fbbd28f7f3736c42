"""The REST API's shapes (the design's, as written) and their translation to and from jetcron's. Pure.

`POST /api/v1/jobs` takes the design's body: `command` a string (run by `sh -c`) or an argv list, `schedule` a
cron expression (in `timezone`), an ISO 8601 instant (once, then), or absent (now); `resources.memory_gb`;
`retry_policy: {max_retries, backoff}`. It also takes every other field of jetcron's job spec (schemas/JobSpec.json)
in the spec's own shape, and the spec's shape where the design's differs (`schedule` an object, `resources.memory_mb`,
`retry`); a body giving both shapes of one thing is refused naming the field (docs/rest-api.md, "The body"). A job's
status is its latest run's (status.py).
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import Any, Literal

import msgspec

from jetcron.core.errors import InvalidSpec
from jetcron.core.models import (
    HistoryPolicy,
    JitterPolicy,
    JobRecord,
    JobStatus,
    JoinPolicy,
    MisfirePolicy,
    NotifyRule,
    OverlapPolicy,
    Priority,
    RetryPolicy,
    Run,
    Schedule,
)
from jetcron.core.validate import MAX_MEMORY_MB
from jetcron_services.gateway import status as words


class _Body(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    pass


class ResourcesBody(_Body, kw_only=True):
    cpu: float = 0.1
    memory_gb: float | None = None
    """GiB (the design's); default 0.0625. Or memory_mb (the spec's), not both."""
    memory_mb: int | None = None
    gpus: int = 0
    """GPUs per host."""
    gpu_model: str | None = None
    hosts: int = 1
    """More than one makes a gang (GPU jobs): all hosts under one leaf switch, all or nothing."""


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
    schedule: str | Schedule | None = None
    """A cron expression, an ISO 8601 instant with its offset (run once then), or absent (run now); or the spec's
    schedule object (then its zone is its `tz`, and `timezone` is refused)."""
    timezone: str | None = None
    """The cron expression's time zone (IANA name); default UTC."""
    retry_policy: RetryPolicyBody | None = None
    """The design's retry policy; or `retry`, the spec's, not both."""
    retry: RetryPolicy | None = None
    depends_on: list[str] = msgspec.field(default_factory=list)
    timeout_seconds: float | None = None
    env: dict[str, str] = msgspec.field(default_factory=dict)
    secrets: list[str] = msgspec.field(default_factory=list)
    notify: list[NotifyRule] = msgspec.field(default_factory=list)
    """Who hears about the job's runs (docs/notifications.md)."""
    start_deadline_seconds: float | None = None
    finish_deadline_seconds: float | None = None
    image: str | None = None
    """Run inside this container image (needs an agent with docker or podman)."""
    require: dict[str, str] = msgspec.field(default_factory=dict)
    """Agent labels that must match (zone, rack, leaf, ...)."""
    overlap: OverlapPolicy | None = None
    misfire: MisfirePolicy | None = None
    jitter: JitterPolicy | None = None
    history: HistoryPolicy | None = None
    join: JoinPolicy | None = None
    """How a job with depends_on joins its upstreams: `same_occurrence` or `latest` (docs/architecture.md)."""
    wait_timeout_seconds: float | None = None
    run_as_root: bool = False
    exclude_calendars: list[str] | None = None
    """Names of the tenant's calendars whose days and hours the job skips (docs/calendars.md)."""
    only_calendars: list[str] | None = None
    """Names of the tenant's calendars an occurrence must fall inside, every one, to run."""
    tenant: str | None = None
    """The caller's own tenant (a tenant's token) or any (the admin's); default: the token's, the admin's default."""


class Created(msgspec.Struct, kw_only=True):
    job_id: str
    status: str
    warnings: list[str] = msgspec.field(default_factory=list)
    """Submit-time advice, e.g. `unsatisfiable: ...` when no registered agent could ever run the job (it is
    stored all the same; its runs wait until such an agent registers)."""


class JobStatusView(msgspec.Struct, kw_only=True):
    job_id: str
    status: str
    """The design's word: `paused` for a paused job; else its latest run's state's word (queued, running,
    completed, failed; cancelled, skipped, blocked by their own names); `queued` before the first run
    (docs/rest-api.md, "Status words")."""
    state: str | None
    """jetcron's exact state: `paused` for a paused job, else its latest run's state (`waiting`, `scheduled`,
    `assigned`, `retry_wait`, `succeeded`, `dead`, ...); null before the first run."""
    machine_id: str | None
    started_at: str | None
    logs_url: str | None
    """The latest run's output, an absolute URL (JETCRON_HTTP_PUBLIC_URL, else the request's own base URL)."""
    attempts: int
    run_id: str | None
    queue: str
    paused: bool
    version: int
    exit_code: int | None = None
    finished_at: str | None = None
    reason: str = ""
    run_state: str | None = None
    """The latest run's state as jetcron names it (shown also when the job is paused); None before the first."""


class JobPage(msgspec.Struct, kw_only=True):
    items: list[JobStatusView]
    next_cursor: str | None


def _schedule(body: CreateJob) -> dict[str, Any]:
    if isinstance(body.schedule, Schedule):
        if body.timezone is not None:
            raise InvalidSpec("timezone", body.timezone, "goes with a cron expression; a schedule object names its "
                              "zone as schedule.tz")
        plain: dict[str, Any] = msgspec.to_builtins(body.schedule)
        return plain
    tz = body.timezone or "UTC"
    if body.schedule is None:
        if body.timezone is not None:
            raise InvalidSpec("timezone", body.timezone, "goes with a cron expression or an instant in schedule; "
                              "without one the job runs once, now, in no zone")
        return {"kind": "now"}
    try:
        instant = datetime.fromisoformat(body.schedule.replace("Z", "+00:00"))
    except ValueError:
        return {"kind": "cron", "cron": body.schedule, "tz": tz}
    return {"kind": "at", "at": instant.isoformat(), "tz": tz}


MAX_MEMORY_GB = MAX_MEMORY_MB // 1024
"""The spec's own bound (jetcron.core.validate), in GiB: a larger float would not even convert (1e308 GiB is infinite
MiB)."""


def _resources(body: ResourcesBody) -> dict[str, Any]:
    if body.memory_mb is not None and body.memory_gb is not None:
        raise InvalidSpec("resources.memory_mb", body.memory_mb, "give resources.memory_gb or resources.memory_mb, "
                          "not both")
    if body.memory_mb is not None:
        memory = body.memory_mb
    else:
        gib = 0.0625 if body.memory_gb is None else body.memory_gb
        if not math.isfinite(gib) or gib <= 0 or gib > MAX_MEMORY_GB:
            raise InvalidSpec("resources.memory_gb", gib, f"must be a positive number of GiB, at most {MAX_MEMORY_GB}")
        memory = max(1, round(gib * 1024))
    return {"cpu": body.cpu, "memory_mb": memory, "gpus": body.gpus, "gpu_model": body.gpu_model,
            "hosts": body.hosts}


def _retry(body: CreateJob) -> dict[str, Any]:
    if body.retry is not None:
        if body.retry_policy is not None:
            raise InvalidSpec("retry", msgspec.to_builtins(body.retry), "give retry_policy (the design's) or retry "
                              "(the spec's), not both")
        plain: dict[str, Any] = msgspec.to_builtins(body.retry)
        return plain
    policy = body.retry_policy or RetryPolicyBody()
    return {"max_attempts": policy.max_retries + 1, "initial_seconds": policy.initial_seconds,
            "multiplier": 2.0 if policy.backoff == "exponential" else 1.0}


# The spec's own fields, passed on as given when the body sets them (the API applies its defaults otherwise).
_AS_GIVEN = ("timeout_seconds", "start_deadline_seconds", "finish_deadline_seconds", "image", "overlap", "misfire",
             "jitter", "history", "join", "wait_timeout_seconds", "tenant", "exclude_calendars", "only_calendars")


def job_spec(body: CreateJob) -> dict[str, Any]:
    """The API's job spec for the body: the design's fields translated, the spec's passed on (the API validates
    both and names the field that fails). Two shapes of one thing given at once: InvalidSpec naming the field."""
    command = ["sh", "-c", body.command] if isinstance(body.command, str) else body.command
    spec: dict[str, Any] = {
        "name": body.name, "command": command, "priority": body.priority.value, "queue": body.queue,
        "schedule": _schedule(body), "depends_on": body.depends_on, "env": body.env, "secrets": body.secrets,
        "resources": _resources(body.resources), "retry": _retry(body),
    }
    for key in _AS_GIVEN:
        if getattr(body, key) is not None:
            spec[key] = msgspec.to_builtins(getattr(body, key))
    if body.notify:
        spec["notify"] = msgspec.to_builtins(body.notify)
    if body.require:
        spec["require"] = body.require
    if body.run_as_root:
        spec["run_as_root"] = True
    return spec


# The API names the fields of its own spec (decode errors prefix them with `spec.`); where the REST caller used
# the design's shape, the error names the design's field.
_FIELDS = {"resources.memory_mb": "resources.memory_gb", "retry.max_attempts": "retry_policy.max_retries",
           "retry.multiplier": "retry_policy.backoff", "retry.initial_seconds": "retry_policy.initial_seconds",
           "schedule.tz": "timezone", "schedule": "schedule"}


def _renamed(body: CreateJob | None) -> dict[str, str]:
    """The renames that apply to this body: none for a part it gave in the spec's shape."""
    if body is None:
        return _FIELDS
    spec_shaped = {"resources.memory_mb": body.resources.memory_mb is not None,
                   "retry.": body.retry is not None, "schedule": isinstance(body.schedule, Schedule)}
    return {ours: theirs for ours, theirs in _FIELDS.items()
            if not any(ours.startswith(prefix) for prefix, given in spec_shaped.items() if given)}


def rest_field(field: str | None, body: CreateJob | None = None) -> str | None:
    """The name the REST caller used for a field the API named in its own spec's terms (the design's, unless
    `body` gave that part in the spec's shape)."""
    if field is None:
        return None
    field = field.removeprefix("spec.")
    for ours, theirs in _renamed(body).items():
        if field == ours or field.startswith(ours + "."):
            return theirs
    return field


def job_id(job: JobRecord, tenant: str | None) -> str:
    """How the caller names the job: a tenant by its name, the admin by its key (ids.job_key)."""
    return job.spec.name if tenant is not None else job.spec.key


def job_status(job: JobRecord, run: Run | None, tenant: str | None, *, base: str) -> JobStatusView:
    """The design's job view: the job with its latest run; `base` is the gateway's public URL, for logs_url."""
    return JobStatusView(
        job_id=job_id(job, tenant), status=words.shown(job, run), state=words.state_of(job, run),
        machine_id=run.agent if run else None,
        started_at=run.started_at.isoformat() if run and run.started_at else None,
        logs_url=f"{base}/api/v1/runs/{run.run_id}/logs" if run else None, attempts=run.attempt if run else 0,
        run_id=run.run_id if run else None, queue=job.spec.queue, paused=job.status is JobStatus.PAUSED,
        version=job.version, exit_code=run.exit_code if run else None,
        finished_at=run.finished_at.isoformat() if run and run.finished_at else None,
        reason=run.reason if run else "", run_state=run.state.value if run else None)

"""Domain models: the user's job spec and the stored job and run records."""

from __future__ import annotations

import enum
from datetime import datetime
from typing import ClassVar

import msgspec

from jetcron.core.ids import job_key
from jetcron.core.run_state import RunState

__all__ = [
    "AgentInfo", "AttemptRecord", "FoldPolicy", "GapPolicy", "HistoryPolicy", "JitterPolicy", "JobRecord", "JobSpec",
    "JobStatus", "JoinPolicy", "MisfireKind", "MisfirePolicy", "NotifyEvent", "NotifyRule", "OverlapPolicy",
    "Preemption", "Priority", "QueueQuota", "Resources",
    "RetryPolicy", "Run", "RunState", "Schedule", "ScheduleKind", "TenantPolicy",
]


# gc=False: these are trees of plain data (no cycles), and the services hold them by the hundred thousand in a
# herd. Left to the cycle collector, each full collection walked them all: multi-second pauses in the agent
# and placement at 100,000 staged runs. Their lists and dicts are still tracked; a struct holding nothing
# that could point back at it needs no tracking itself.
#
# omit_defaults: a field at its default is left out when encoded, and read back as that default. A spec left at
# its defaults is about 1 KB of a run record's 1.4 KB, and every record is written three times per run and read by
# every watcher of its bucket; left out, a burst moves half the bytes and the server spends a tenth less CPU
# (docs/decisions-protocol.md, "Built: records and messages leave out the fields at their defaults"). So a
# default is part of the stored format: changing one changes what every record written before means
# (tests/unit/test_stored_defaults.py holds them). People see every field: the doors show records through
# wire.codec.with_defaults() and plain() (`stored_compact`).
class _Spec(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, gc=False, omit_defaults=True):
    """User-written structures: a misspelt field must fail, not vanish."""

    stored_compact: ClassVar[bool] = True


class _Record(msgspec.Struct, frozen=True, kw_only=True, gc=False, omit_defaults=True):
    """Stored and exchanged records: tolerate unknown fields for rolling upgrades."""

    stored_compact: ClassVar[bool] = True


class ScheduleKind(enum.StrEnum):
    NOW = "now"
    """Run once, as soon as the job is stored."""
    AT = "at"
    """Run once at a given instant."""
    EVERY = "every"
    """Run on a fixed interval from an anchor."""
    CRON = "cron"
    """Run on a cron expression in the schedule's time zone."""


class GapPolicy(enum.StrEnum):
    SHIFT = "shift"
    """A time inside a spring-forward gap runs at the first valid instant after it."""
    SKIP = "skip"
    """A time inside a spring-forward gap is recorded as skipped."""


class FoldPolicy(enum.StrEnum):
    FIRST = "first"
    """A fixed-hour time in a fall-back fold runs once, in the first (daylight) pass."""
    LAST = "last"
    """A fixed-hour time in a fall-back fold runs once, in the second (standard) pass."""
    BOTH = "both"
    """A fixed-hour time in a fall-back fold runs in both passes."""


class MisfireKind(enum.StrEnum):
    SKIP = "skip"
    """Missed occurrences are recorded as skipped."""
    LATEST = "latest"
    """Only the latest missed occurrence runs, late; the others are recorded as skipped."""
    ALL = "all"
    """Every missed occurrence runs, up to max_catchup; the rest are recorded as skipped."""


class OverlapPolicy(enum.StrEnum):
    ALLOW = "allow"
    """Start the new run even though an earlier one is still active."""
    SKIP = "skip"
    """Record the new occurrence as skipped while an earlier run is active."""
    BUFFER_ONE = "buffer_one"
    """Keep at most one waiting occurrence; start it when the active run ends."""
    CANCEL_PREVIOUS = "cancel_previous"
    """Cancel the active run and start the new one."""


class JoinPolicy(enum.StrEnum):
    """How a job with depends_on waits for its upstreams (docs/architecture.md, "Flows")."""

    SAME_OCCURRENCE = "same_occurrence"
    """A run per occurrence of the flow's root: it runs once its upstreams' runs of that occurrence succeeded, and
    is blocked when one of them failed for good. The job has no schedule of its own."""
    LATEST = "latest"
    """It runs when every upstream has a run that succeeded since this job last ran: on its own schedule once
    they have, or, without a schedule, as soon as they have."""


class Priority(enum.StrEnum):
    CRITICAL = "critical"
    HIGH = "high"
    NORMAL = "normal"
    LOW = "low"

    @property
    def rank(self) -> int:
        """0 is served first."""
        return _PRIORITY_RANK[self]


_PRIORITY_RANK = {Priority.CRITICAL: 0, Priority.HIGH: 1, Priority.NORMAL: 2, Priority.LOW: 3}


class JobStatus(enum.StrEnum):
    ACTIVE = "active"
    PAUSED = "paused"
    DELETED = "deleted"


class Schedule(_Spec, frozen=True, kw_only=True):
    """When a job runs."""

    kind: ScheduleKind = ScheduleKind.NOW
    at: datetime | None = None
    """For kind=at: the instant (ISO 8601 with an offset)."""
    every_seconds: float | None = None
    """For kind=every: the interval in seconds."""
    anchor: datetime | None = None
    """For kind=every: an instant the interval is aligned to (default: the job's creation)."""
    cron: str | None = None
    """For kind=cron: 5 fields, 6 with seconds first, or an @alias."""
    tz: str = "UTC"
    """IANA time zone the cron expression is read in."""
    on_gap: GapPolicy = GapPolicy.SHIFT
    on_fold: FoldPolicy = FoldPolicy.FIRST


class Resources(_Spec, frozen=True, kw_only=True):
    """What one run needs on each host it runs on."""

    cpu: float = 0.1
    """CPU cores."""
    memory_mb: int = 64
    gpus: int = 0
    """GPUs per host."""
    gpu_model: str | None = None
    hosts: int = 1
    """More than one makes a gang: all hosts under one leaf switch, all or nothing."""


class RetryPolicy(_Spec, frozen=True, kw_only=True):
    """How failed attempts are retried."""

    max_attempts: int = 3
    """Attempts in all, the first included."""
    initial_seconds: float = 1.0
    multiplier: float = 2.0
    max_delay_seconds: float = 300.0
    jitter: float = 0.1
    """Fraction of each delay added at random (0..1)."""
    non_retryable_exit_codes: list[int] = msgspec.field(default_factory=list)


class MisfirePolicy(_Spec, frozen=True, kw_only=True):
    """What happens to occurrences missed while the trigger was down or the job paused."""

    kind: MisfireKind = MisfireKind.LATEST
    catchup_window_seconds: float = 3600.0
    """Occurrences older than this (against now) are skipped whatever the kind."""
    max_catchup: int = 10
    grace_seconds: float = 5.0
    """An occurrence fired this late still counts as on time."""


class JitterPolicy(_Spec, frozen=True, kw_only=True):
    """Spread runs that share a fire time."""

    window_seconds: float = 0.0
    """A deterministic offset in [0, window) derived from the job name."""
    random_seconds: float = 0.0
    """An extra random offset in [0, random) drawn per occurrence."""


class HistoryPolicy(_Spec, frozen=True, kw_only=True):
    """How long finished runs are kept (docs/operations.md, "History"): a job's own, else its tenant's, else the
    cluster's (JETCRON_HISTORY_*), field by field; a field left unset falls through to the next."""

    keep_seconds: float | None = None
    """Seconds a finished run is kept after it ended: its record with every attempt, its events and output. Never
    less than the cluster's floor (JETCRON_HISTORY_MIN_SECONDS) nor the job's misfire catch-up window."""
    keep_succeeded: int | None = None
    """At most this many succeeded runs of the job are kept, the newest (Kubernetes' successfulJobsHistoryLimit);
    older ones go before keep_seconds. Unset: no count limit."""
    keep_failed: int | None = None
    """The same for failed, dead and blocked runs (failedJobsHistoryLimit)."""


class NotifyEvent(enum.StrEnum):
    """What a job's owner can be told about (docs/notifications.md)."""

    DEAD = "dead"
    """The run failed for good: its last attempt failed (it is in the dead-letter queue)."""
    FAILED = "failed"
    """One attempt failed (a retry may follow)."""
    BLOCKED = "blocked"
    """The run will not start: an upstream job's run in its flow did not succeed."""
    SUCCEEDED = "succeeded"
    TIMED_OUT = "timed_out"
    """One attempt ran past timeout_seconds and was stopped."""
    START_MISSED = "start_missed"
    """The occurrence did not start within start_deadline_seconds of its nominal time (or never fired)."""
    FINISH_MISSED = "finish_missed"
    """The run did not finish within finish_deadline_seconds of its start."""
    SKIPPED = "skipped"
    """The occurrence was recorded as skipped (misfire, overlap, DST gap); the reason says which."""


class NotifyRule(_Spec, frozen=True, kw_only=True):
    """Tell one target about some events of a job: exactly one of webhook, subject and email."""

    on: list[NotifyEvent]
    webhook: str | None = None
    """An http(s) URL that receives a signed JSON POST per event."""
    subject: str | None = None
    """Published to `jc.notify.<tenant>.<subject>` (JetStream, stream JC_NOTIFY) for services to consume."""
    email: str | None = None
    """An address, through the deployment's SMTP server (JETCRON_SMTP_HOST)."""
    secret: str | None = None
    """The name of the tenant's secret (`jetcron secrets set`) that signs webhook bodies (HMAC-SHA256)."""


class JobSpec(_Spec, frozen=True, kw_only=True):
    """A job as a user writes it."""

    name: str
    command: list[str]
    """argv, executed without a shell."""
    schedule: Schedule = msgspec.field(default_factory=Schedule)
    env: dict[str, str] = msgspec.field(default_factory=dict)
    image: str | None = None
    """Run inside this container image (needs an agent with docker or podman)."""
    resources: Resources = msgspec.field(default_factory=Resources)
    retry: RetryPolicy = msgspec.field(default_factory=RetryPolicy)
    timeout_seconds: float | None = None
    misfire: MisfirePolicy = msgspec.field(default_factory=MisfirePolicy)
    overlap: OverlapPolicy = OverlapPolicy.ALLOW
    jitter: JitterPolicy = msgspec.field(default_factory=JitterPolicy)
    priority: Priority = Priority.NORMAL
    tenant: str = "default"
    queue: str = "default"
    """The tenant's named queue this job is filed under (lists filter by it)."""
    depends_on: list[str] = msgspec.field(default_factory=list)
    require: dict[str, str] = msgspec.field(default_factory=dict)
    """Agent labels that must match (zone, rack, leaf, ...)."""
    secrets: list[str] = msgspec.field(default_factory=list)
    """Names of secrets (its tenant's, `jetcron secrets set`), each given to the process as a variable of that
    name; resolved on the agent when the attempt starts, so no record ever holds a value."""
    run_as_root: bool = False
    """Run as root: only for a tenant whose policy allows it (TenantPolicy.allow_run_as_root), and only on agents
    that allow it (JETCRON_AGENT_ALLOW_ROOT); jobs run unprivileged otherwise."""
    notify: list[NotifyRule] = msgspec.field(default_factory=list)
    """Who hears about this job's runs, and of which events."""
    start_deadline_seconds: float | None = None
    """An occurrence not started this long after its nominal time (skipped or never fired included) is a
    `start_missed`; one never fired is recorded skipped then (Kubernetes CronJob's startingDeadlineSeconds)."""
    finish_deadline_seconds: float | None = None
    """A run not finished this long after it started is a `finish_missed` (it keeps running: timeout_seconds
    stops a run; this deadline only tells)."""
    history: HistoryPolicy | None = None
    """How long this job's finished runs are kept; unset fields fall back to its tenant's, then the cluster's."""
    join: JoinPolicy | None = None
    """How a job with depends_on joins its upstreams; unset: `latest` for a job with a schedule of its own,
    `same_occurrence` for one without (jetcron.core.dag.join_of)."""
    wait_timeout_seconds: float | None = None
    """A run waiting on its upstreams longer than this is blocked (and its owner told, by its `blocked` rules)."""
    exclude_calendars: list[str] = msgspec.field(default_factory=list)
    """Names of the tenant's calendars (`jetcron calendars`, docs/calendars.md): an occurrence that falls on any
    of them is recorded skipped, its reason naming the calendar (`calendar us-holidays`)."""
    only_calendars: list[str] = msgspec.field(default_factory=list)
    """Names of the tenant's calendars an occurrence must fall inside, every one of them, to run (`business-days`);
    one outside any is recorded skipped, naming the calendar."""


    @property
    def key(self) -> str:
        """Where the job is stored and what its runs' ids start with (ids.job_key)."""
        return job_key(self.tenant, self.name)

    def upstream_keys(self) -> list[str]:
        """depends_on names the tenant's own jobs: their keys."""
        return [job_key(self.tenant, name) for name in self.depends_on]


class JobRecord(_Record, frozen=True, kw_only=True):
    """A stored job: the spec plus status."""

    spec: JobSpec
    status: JobStatus = JobStatus.ACTIVE
    version: int = 1
    created_at: datetime
    updated_at: datetime
    body_hash: str = ""
    warnings: list[str] = msgspec.field(default_factory=list)
    trace_id: str = ""
    """The trace of the request that created or last changed the job: a one-off run continues it."""
    paused_at: datetime | None = None
    """When the job was last paused."""
    resumed_at: datetime | None = None
    """When the job was last resumed: occurrences before it that were not recorded missed their time (misfire)."""
    expires_at: datetime | None = None
    """When the server removes this record (jetcron.core.retention.job_ttl): a one-shot job's, its run's retention after
    it fired (a `now` job's made with it, `fired_by_mark`: its runs' retention after it was made); a deleted job's,
    the cluster's retention after it was deleted. None: kept."""
    fired_by_mark: bool = False
    """A `now` job made with its end already set: whether it has fired is its shard's fire mark
    (jetcron.core.fire_marks), not its end; the trigger writes nothing to it. Any later change by the api turns it into
    an ordinary one-shot job, ended if the mark says it fired (jetcron.core.retention.settled)."""


class AttemptRecord(_Record, frozen=True, kw_only=True):
    """What happened to one attempt."""

    attempt: int
    agent: str | None = None
    token: int = 0
    outcome: str = ""
    exit_code: int | None = None
    reason: str = ""
    started_at: datetime | None = None
    finished_at: datetime | None = None


class Run(_Record, frozen=True, kw_only=True):
    """One occurrence of a job: the unit that is placed, executed and recorded."""

    run_id: str
    job: str
    tenant: str = "default"
    state: RunState
    attempt: int = 1
    scheduled_at: datetime
    """The nominal fire time."""
    due_at: datetime
    """When it should start: nominal time plus jitter, or the retry time."""
    created_at: datetime
    spec: JobSpec | None = None
    """The job spec as it was when the run was created (None for skipped records)."""
    agent: str | None = None
    agents: list[str] = msgspec.field(default_factory=list)
    """For gangs: every host of the gang (the first holds the run lease and reports for the gang)."""
    gpu_indices: dict[str, list[int]] = msgspec.field(default_factory=dict)
    """Per agent, the GPU devices this attempt was given: a new placement leader rebuilds reservations from it."""
    token: int = 0
    """The fencing token (run lease revision) of the current attempt."""
    assigned_at: datetime | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    exit_code: int | None = None
    outcome: str = ""
    reason: str = ""
    flow_id: str = ""
    """The root occurrence of a DAG flow this run belongs to."""
    after: str = ""
    """For a waiting run: the run it waits for (overlap buffer_one)."""
    trace_id: str = ""
    """The trace every span of this run belongs to, across all its attempts (`jetcron runs get` shows it)."""
    history: list[AttemptRecord] = msgspec.field(default_factory=list)
    missed: list[str] = msgspec.field(default_factory=list)
    """Deadlines this occurrence missed ("start", "finish"), each recorded once (docs/notifications.md)."""
    released_at: datetime | None = None
    """When it left `waiting` (its upstreams or the run before it allowed it): when a `latest` join last ran."""
    keep_seconds: float | None = None
    """How long this run is kept once it has ended (its job's history policy, else its tenant's, else the
    cluster's, when it was recorded; jetcron.core.retention). None: the cluster's, at each write."""
    preemptions: int = 0
    """How many of its attempts were preempted by runs of higher priority (docs/preemption.md): each one queued
    the run again as a new attempt, spending nothing of its retry budget."""

    @property
    def idempotency_key(self) -> str:
        """Stable across every attempt of this run."""
        return f"run:{self.run_id}"


class AgentInfo(_Record, frozen=True, kw_only=True):
    """An agent as it advertises itself in the agents bucket."""

    agent_id: str
    host: str = ""
    cpu: float
    memory_mb: int
    gpus: int = 0
    gpu_model: str | None = None
    gpu_indices: list[int] = msgspec.field(default_factory=list)
    labels: dict[str, str] = msgspec.field(default_factory=dict)
    capabilities: list[str] = msgspec.field(default_factory=list)
    limits: str = "rlimit"
    """How resource limits are enforced: cgroup2 or rlimit."""
    running: int = 0
    slots: int | None = None
    """How many attempts this agent holds at once (JETCRON_AGENT_SLOTS), waiting ones included: placement gives
    it no more than that. None from agents that predate it: no limit."""
    pending_reports: int = 0
    """Reports (started, finished) this agent has queued or in flight. A run whose lease lapsed while its report
    waited here is not lost: the tracker waits for a heartbeat that says none are left (or for the agent to go)."""
    free_cpu: float | None = None
    """Capacity not taken by the runs executing now (None from agents that predate it)."""
    free_memory_mb: int | None = None
    free_gpus: int | None = None
    draining: bool = False
    heartbeat_at: datetime
    started_at: datetime
    gpu_health_ok: bool | None = None
    """The last GPU health check passed (True) or failed (False); None when none ran (no GPUs)."""
    gpu_health_at: datetime | None = None
    """When that check ran, on the agent's clock: placement clears a suspect host only after a later pass."""
    gpu_health_detail: str = ""
    """What the failing check said (its output or error), for operators."""
    job_user: str = ""
    """Who this agent's jobs run as: `@own-uid` (each attempt a uid of its own, JETCRON_AGENT_JOB_UIDS), a user's
    name (every job as that one user: running jobs can reach each other's processes), or `@agent` (the agent's own
    user, which cannot switch users: jobs hold its groups and reach what it reaches). Empty from agents that
    predate it."""


class ShardLayout(_Record, frozen=True, kw_only=True):
    """How many shards the trigger splits jobs into: set once, by the first trigger replica of the cluster."""

    shards: int
    set_at: datetime
    set_by: str
    """The replica that set it."""


class Preemption(_Spec, frozen=True, kw_only=True):
    """Whether the running runs of a tenant, or of one of its named queues, may be preempted: stopped (SIGTERM, a
    grace period, SIGKILL) to give their place to a waiting run of strictly higher priority, and queued again as a
    new attempt that resumes from their own checkpoint (docs/preemption.md). A field left unset takes the
    cluster's setting (JETCRON_PREEMPTION_*)."""

    enabled: bool = True
    """False: never preempted (a queue that opts out inside a preemptible tenant)."""
    max_preemptions: int | None = None
    """A run preempted this many times is not preempted again (JETCRON_PREEMPTION_MAX_PER_RUN)."""
    min_runtime_seconds: float | None = None
    """A run is not preempted before its attempt has run this long (JETCRON_PREEMPTION_MIN_RUNTIME)."""
    grace_seconds: float | None = None
    """Seconds between SIGTERM and SIGKILL when it is preempted: time to save a checkpoint
    (JETCRON_PREEMPTION_GRACE)."""


class QueueQuota(_Spec, frozen=True, kw_only=True):
    """What the running runs of one of a tenant's named queues (JobSpec.queue) may hold at once, inside the
    tenant's own quotas (both must hold for a run to be placed). A field left unset does not limit the queue."""

    max_cpu: float | None = None
    """CPU cores, summed over the queue's assigned and running runs (a gang counts every host)."""
    max_memory_mb: int | None = None
    """Memory in MB, summed the same way."""
    max_gpus: int | None = None
    """GPUs, summed the same way."""
    preemption: Preemption | None = None
    """Whether the queue's running runs may be preempted, in place of its tenant's setting (TenantPolicy.preemption);
    unset: the tenant's."""


class TenantPolicy(_Spec, frozen=True, kw_only=True):
    """Quotas and weight for one tenant."""

    tenant: str
    weight: float = 1.0
    max_cpu: float | None = None
    max_memory_mb: int | None = None
    max_gpus: int | None = None
    max_submits_per_second: float | None = None
    """Creates, triggers, backfills and replays per second (bursts of as many), per api replica."""
    max_pending_runs: int | None = None
    """Runs waiting for placement at most; a submit beyond it is refused (rate_limited) until some start."""
    history: HistoryPolicy | None = None
    """How long the tenant's finished runs are kept, where a job says nothing; unset fields fall back to the
    cluster's. Applies to runs recorded after it is set."""
    max_priority: Priority | None = None
    """The highest priority the tenant's jobs and runs may ask for (created, updated or reprioritized); unset: any."""
    queues: dict[str, QueueQuota] = msgspec.field(default_factory=dict)
    """Quotas per named queue of the tenant (JobSpec.queue), e.g. {"batch": {"max_cpu": 8}}: a queue at its quota
    waits while the tenant's other queues go on. A queue not named here is capped by the tenant's quotas only."""
    preemption: Preemption | None = None
    """Whether the tenant's running runs may be preempted by waiting runs of strictly higher priority (any
    tenant's), and its guards (docs/preemption.md); a queue's own setting wins. Unset: never preempted."""
    allow_run_as_root: bool = False
    """Whether the tenant's jobs may ask to run as root (JobSpec.run_as_root): refused at create and update
    otherwise, and checked again when an attempt starts (an agent must allow root too, JETCRON_AGENT_ALLOW_ROOT).
    A job running as root reaches everything on its agent's host: the agent's credential, the secrets key, every
    other job."""

"""The user's job spec and its parts: schedule, resources, retries, misfires, jitter, history, notifications."""

from __future__ import annotations

import enum
from datetime import datetime

import msgspec

from jetcron.core.ids import job_key
from jetcron.core.models.spec_choices import (
    FoldPolicy,
    GapPolicy,
    JoinPolicy,
    MisfireKind,
    OverlapPolicy,
    Priority,
    ScheduleKind,
)
from jetcron.core.models.stored_format import Spec


class Schedule(Spec, frozen=True, kw_only=True):
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


class Resources(Spec, frozen=True, kw_only=True):
    """What one run needs on each host it runs on."""

    cpu: float = 0.1
    """CPU cores."""
    memory_mb: int = 64
    gpus: int = 0
    """GPUs per host."""
    gpu_model: str | None = None
    hosts: int = 1
    """More than one makes a gang: all hosts under one leaf switch, all or nothing."""


class RetryPolicy(Spec, frozen=True, kw_only=True):
    """How failed attempts are retried."""

    max_attempts: int = 3
    """Attempts in all, the first included."""
    initial_seconds: float = 1.0
    multiplier: float = 2.0
    max_delay_seconds: float = 300.0
    jitter: float = 0.1
    """Fraction of each delay added at random (0..1)."""
    non_retryable_exit_codes: list[int] = msgspec.field(default_factory=list)


class MisfirePolicy(Spec, frozen=True, kw_only=True):
    """What happens to occurrences missed while the trigger was down or the job paused."""

    kind: MisfireKind = MisfireKind.LATEST
    catchup_window_seconds: float = 3600.0
    """Occurrences older than this (against now) are skipped whatever the kind."""
    max_catchup: int = 10
    grace_seconds: float = 5.0
    """An occurrence fired this late still counts as on time."""


class JitterPolicy(Spec, frozen=True, kw_only=True):
    """Spread runs that share a fire time."""

    window_seconds: float = 0.0
    """A deterministic offset in [0, window) derived from the job name."""
    random_seconds: float = 0.0
    """An extra random offset in [0, random) drawn per occurrence."""


class HistoryPolicy(Spec, frozen=True, kw_only=True):
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


class NotifyRule(Spec, frozen=True, kw_only=True):
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


class JobSpec(Spec, frozen=True, kw_only=True):
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
    `same_occurrence` for one without (jetcron.core.lifecycle.dag.join_of)."""
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

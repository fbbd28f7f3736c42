"""The stored records: a job, a run and its attempts, an agent, and the trigger's shard layout."""

from __future__ import annotations

from datetime import datetime

import msgspec

from jetcron.core.lifecycle.run_state import RunState
from jetcron.core.models.job_spec import JobSpec
from jetcron.core.models.spec_choices import JobStatus
from jetcron.core.models.stored_format import Record


class JobRecord(Record, frozen=True, kw_only=True):
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
    """When the server removes this record (jetcron.core.lifecycle.retention.job_ttl): a one-shot job's, its run's
    retention after it fired (a `now` job's made with it, `fired_by_mark`: its runs' retention after it was made); a
    deleted job's, the cluster's retention after it was deleted. None: kept."""
    fired_by_mark: bool = False
    """A `now` job made with its end already set: whether it has fired is its shard's fire mark
    (jetcron.core.timing.fire_marks), not its end; the trigger writes nothing to it. Any later change by the api turns
    it into an ordinary one-shot job, ended if the mark says it fired (jetcron.core.lifecycle.retention.settled)."""


class AttemptRecord(Record, frozen=True, kw_only=True):
    """What happened to one attempt."""

    attempt: int
    agent: str | None = None
    token: int = 0
    outcome: str = ""
    exit_code: int | None = None
    reason: str = ""
    started_at: datetime | None = None
    finished_at: datetime | None = None


class Run(Record, frozen=True, kw_only=True):
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
    cluster's, when it was recorded; jetcron.core.lifecycle.retention). None: the cluster's, at each write."""
    preemptions: int = 0
    """How many of its attempts were preempted by runs of higher priority (docs/preemption.md): each one queued
    the run again as a new attempt, spending nothing of its retry budget."""

    @property
    def idempotency_key(self) -> str:
        """Stable across every attempt of this run."""
        return f"run:{self.run_id}"


class AgentInfo(Record, frozen=True, kw_only=True):
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


class ShardLayout(Record, frozen=True, kw_only=True):
    """How many shards the trigger splits jobs into: set once, by the first trigger replica of the cluster."""

    shards: int
    set_at: datetime
    set_by: str
    """The replica that set it."""

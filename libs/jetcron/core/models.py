"""Domain models: the user's job spec and the stored job and run records (their bases: core.stored_format)."""

from __future__ import annotations

from jetcron.core.job_spec import (
    HistoryPolicy,
    JitterPolicy,
    JobSpec,
    MisfirePolicy,
    NotifyEvent,
    NotifyRule,
    Resources,
    RetryPolicy,
    Schedule,
)
from jetcron.core.run_state import RunState
from jetcron.core.spec_choices import (
    FoldPolicy,
    GapPolicy,
    JobStatus,
    JoinPolicy,
    MisfireKind,
    OverlapPolicy,
    Priority,
    ScheduleKind,
)
from jetcron.core.stored_records import AgentInfo, AttemptRecord, JobRecord, Run, ShardLayout
from jetcron.core.tenancy import Preemption, QueueQuota, TenantPolicy

__all__ = [
    "AgentInfo", "AttemptRecord", "FoldPolicy", "GapPolicy", "HistoryPolicy", "JitterPolicy", "JobRecord", "JobSpec",
    "JobStatus", "JoinPolicy", "MisfireKind", "MisfirePolicy", "NotifyEvent", "NotifyRule", "OverlapPolicy",
    "Preemption", "Priority", "QueueQuota", "Resources",
    "RetryPolicy", "Run", "RunState", "Schedule", "ScheduleKind", "ShardLayout", "TenantPolicy",
]

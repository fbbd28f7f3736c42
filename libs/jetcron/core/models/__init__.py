"""Domain models: the user's job spec and the stored job and run records (their bases:
jetcron.core.models.stored_format)."""

from __future__ import annotations

from jetcron.core.lifecycle.run_state import RunState
from jetcron.core.models.job_spec import (
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
from jetcron.core.models.spec_choices import (
    FoldPolicy,
    GapPolicy,
    JobStatus,
    JoinPolicy,
    MisfireKind,
    OverlapPolicy,
    Priority,
    ScheduleKind,
)
from jetcron.core.models.stored_records import AgentInfo, AttemptRecord, JobRecord, Run, ShardLayout
from jetcron.core.models.tenancy import Preemption, QueueQuota, TenantPolicy

__all__ = [
    "AgentInfo", "AttemptRecord", "FoldPolicy", "GapPolicy", "HistoryPolicy", "JitterPolicy", "JobRecord", "JobSpec",
    "JobStatus", "JoinPolicy", "MisfireKind", "MisfirePolicy", "NotifyEvent", "NotifyRule", "OverlapPolicy",
    "Preemption", "Priority", "QueueQuota", "Resources",
    "RetryPolicy", "Run", "RunState", "Schedule", "ScheduleKind", "ShardLayout", "TenantPolicy",
]

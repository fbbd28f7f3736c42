"""The words a job spec chooses among: schedule kinds, DST and misfire policies, overlap, joins, priorities."""

from __future__ import annotations

import enum


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

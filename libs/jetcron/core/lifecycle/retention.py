"""How long history is kept: a finished run's retention resolved from its job, tenant and cluster, the TTL each
write of its record, events and output carries, and which runs a per-job count limit lets go.

What is still needed is never let go: a run that has not ended has no TTL; an ended one is kept at least the
cluster's floor (so the notifier and every watcher read its last change) and at least its job's misfire
catch-up window (its record is the fire gate of its occurrence: were it gone while a trigger could still plan
that occurrence, the occurrence would be recorded a second time); a dead run at least as long as its dead
letter. Pure: the clock is an argument.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from msgspec.structs import replace

from jetcron.core.errors import InvalidSpec
from jetcron.core.models import HistoryPolicy, JobRecord, JobSpec, Run, RunState, ScheduleKind

__all__ = ["ClusterHistory", "Ended", "fires_by_mark", "gate_seconds", "job_ttl", "keep_seconds", "may_shed",
           "one_shot", "over_count", "record_ttl", "resolve", "settled", "stream_ttl", "to_free", "validate_history"]

FAILED_LIKE = frozenset({RunState.FAILED, RunState.DEAD, RunState.BLOCKED})
"""What keep_failed counts (Kubernetes counts a CronJob's failed Jobs; a dead or blocked run failed too)."""


@dataclass(frozen=True)
class ClusterHistory:
    """The operator's retention (JETCRON_HISTORY_*): the default under every job and tenant, and its bounds."""

    keep_seconds: float = 3 * 86400.0
    min_seconds: float = 3600.0
    max_seconds: float = 90 * 86400.0
    keep_succeeded: int | None = None
    keep_failed: int | None = None
    dead_letter_seconds: float = 30 * 86400.0

    def policy(self) -> HistoryPolicy:
        return HistoryPolicy(keep_seconds=self.keep_seconds, keep_succeeded=self.keep_succeeded,
                             keep_failed=self.keep_failed)


def resolve(job: HistoryPolicy | None, tenant: HistoryPolicy | None, cluster: ClusterHistory) -> HistoryPolicy:
    """Field by field: the job's, else the tenant's, else the cluster's."""
    layers = [p for p in (job, tenant) if p is not None]
    keep = next((p.keep_seconds for p in layers if p.keep_seconds is not None), cluster.keep_seconds)
    succeeded = next((p.keep_succeeded for p in layers if p.keep_succeeded is not None), cluster.keep_succeeded)
    failed = next((p.keep_failed for p in layers if p.keep_failed is not None), cluster.keep_failed)
    return HistoryPolicy(keep_seconds=keep, keep_succeeded=succeeded, keep_failed=failed)


def gate_seconds(spec: JobSpec | None, cluster: ClusterHistory) -> float:
    """The least time an ended run is kept: the cluster's floor, and the job's catch-up window with its grace
    (the trigger plans every occurrence after its cursor, and never one older than that window)."""
    if spec is None:
        return cluster.min_seconds
    return max(cluster.min_seconds, spec.misfire.catchup_window_seconds + spec.misfire.grace_seconds)


def keep_seconds(spec: JobSpec, tenant: HistoryPolicy | None, cluster: ClusterHistory) -> float:
    """What a new run of `spec` is stamped with (Run.keep_seconds): its resolved retention within the
    cluster's bounds, never below its gate."""
    keep = resolve(spec.history, tenant, cluster).keep_seconds or cluster.keep_seconds
    return max(min(keep, cluster.max_seconds), gate_seconds(spec, cluster))


def _kept_for(run: Run, cluster: ClusterHistory) -> float:
    keep = run.keep_seconds if run.keep_seconds is not None else cluster.keep_seconds
    if run.state is RunState.DEAD:
        keep = max(keep, cluster.dead_letter_seconds)
    return max(keep, gate_seconds(run.spec, cluster))


def record_ttl(run: Run, now: datetime, cluster: ClusterHistory) -> int | None:
    """Whole seconds the record written now lives (its Nats-TTL), or None while the run has not ended: kept
    until it ended plus its retention, and at least the floor from this write (a late change to an old record,
    such as a missed deadline, is read by the notifier before it goes)."""
    if not run.state.terminal:
        return None
    ended = run.finished_at or now
    left = (ended - now).total_seconds() + _kept_for(run, cluster)
    return math.ceil(max(left, cluster.min_seconds))


def stream_ttl(keep: float | None, cluster: ClusterHistory) -> int:
    """The Nats-TTL of a run's event or output chunk: the run's retention counted from the write, within the
    cluster's bounds (the streams' max_age is the upper one; the floor lets the tracker consume an event)."""
    chosen = keep if keep is not None else cluster.keep_seconds
    return math.ceil(min(max(chosen, cluster.min_seconds), cluster.max_seconds))


def one_shot(spec: JobSpec) -> bool:
    """A job that fires once (now, at): once fired, its record has done its work and ages out after its run."""
    return spec.schedule.kind in (ScheduleKind.NOW, ScheduleKind.AT)


def fires_by_mark(spec: JobSpec) -> bool:
    """Whether a job is made with its end set and its firing recorded by its shard's mark
    (jetcron.core.timing.fire_marks): a `now` job the trigger fires itself (one joined on upstreams is released by them,
    and ends as before)."""
    return spec.schedule.kind is ScheduleKind.NOW and not spec.depends_on


def settled(record: JobRecord, fired: bool) -> JobRecord:
    """A job made with its end (JobRecord.fired_by_mark), about to change: an ordinary one-shot job from now on,
    ended if it `fired` (never planned again), else without an end (the trigger plans it; its gate refuses an
    occurrence already recorded, and its end is written once it fires). Any other job: as it is."""
    if not record.fired_by_mark:
        return record
    return replace(record, fired_by_mark=False, expires_at=record.expires_at if fired else None)


def job_ttl(record: JobRecord, now: datetime) -> int | None:
    """Whole seconds a job record written now lives (None: kept): until its expires_at. A fired one-shot job's is
    `keep` after its run was recorded (a `now` job made with its end: `keep` after it was made), so it goes no later
    than its run's record does (`keep` after the run ended); either way a fired job with an end is never planned
    again (jetcron_services.trigger.warm.Warm.fireable; one made with its end once its shard's mark covers it), so it
    cannot fire twice when its run's record has gone first (the server keeps it at least the jobs bucket's marker
    TTL)."""
    if record.expires_at is None:
        return None
    return max(1, math.ceil((record.expires_at - now).total_seconds()))


def may_shed(run: Run, now: datetime, cluster: ClusterHistory) -> bool:
    """Whether storage pressure may let an ended run go before its retention: once its gate has passed. A dead
    run stays (its dead letter is replayed from it); a run that has not ended always stays."""
    if not run.state.terminal or run.state is RunState.DEAD:
        return False
    ended = run.finished_at or run.created_at
    return (now - ended).total_seconds() >= gate_seconds(run.spec, cluster)


def to_free(used: int, limit: int, shed_at: float, slack: float = 0.1) -> int:
    """Bytes to let go of a store at or above `shed_at` of its limit, to bring it `slack` below that line (room
    for a while, not a shed per write); 0 below the line or without a limit."""
    if limit <= 0 or used < shed_at * limit:
        return 0
    return int(used - max(0.0, shed_at - slack) * limit)


@dataclass(frozen=True)
class Ended:
    """What a per-job count limit needs to know of one stored run."""

    run_id: str
    state: RunState
    finished_at: datetime | None
    gate_seconds: float


def counts(policy: HistoryPolicy) -> bool:
    """Whether the policy limits how many of a job's ended runs are kept (keep_succeeded, keep_failed)."""
    return policy.keep_succeeded is not None or policy.keep_failed is not None


def over_count(runs: Iterable[Ended], policy: HistoryPolicy, now: datetime) -> list[str]:
    """The run ids a job's count limits let go: beyond the newest keep_succeeded succeeded runs and the newest
    keep_failed failed-like ones (by run id, which orders a job's runs by occurrence), those past their gate."""
    let_go: list[str] = []
    for limit, states in ((policy.keep_succeeded, frozenset({RunState.SUCCEEDED})),
                          (policy.keep_failed, FAILED_LIKE)):
        if limit is None:
            continue
        counted = sorted((r for r in runs if r.state in states), key=lambda r: r.run_id, reverse=True)
        for run in counted[limit:]:
            ended = run.finished_at or now
            if (now - ended).total_seconds() >= run.gate_seconds:
                let_go.append(run.run_id)
    return sorted(let_go)


def validate_history(policy: HistoryPolicy | None, cluster: ClusterHistory, field: str = "history") -> None:
    """A job's or tenant's policy within the cluster's bounds: a keep below the floor or above the ceiling is
    refused, naming both (silently raised or cut, the user would not get what they asked for)."""
    if policy is None:
        return
    keep = policy.keep_seconds
    if keep is not None:
        if not math.isfinite(keep) or keep <= 0:
            raise InvalidSpec(f"{field}.keep_seconds", keep, "must be a positive number of seconds")
        if keep < cluster.min_seconds or keep > cluster.max_seconds:
            raise InvalidSpec(f"{field}.keep_seconds", keep,
                              f"must be between the cluster's floor {cluster.min_seconds:.0f} s and ceiling "
                              f"{cluster.max_seconds:.0f} s (JETCRON_HISTORY_MIN_SECONDS, JETCRON_HISTORY_MAX_SECONDS)")
    for name in ("keep_succeeded", "keep_failed"):
        count = getattr(policy, name)
        if count is not None and not (isinstance(count, int) and 0 <= count <= 1_000_000):
            raise InvalidSpec(f"{field}.{name}", count, "must be a whole number from 0 to 1000000")

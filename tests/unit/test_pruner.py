"""The tracker's pruning of a job's count limits (run_tracker/history.Pruner), on the bus's twins."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any, cast

from twin_support import twin_context

from jetcron.core.models import HistoryPolicy, JobSpec, Run, RunState
from jetcron.services.run_tracker.history import Pruner
from jetcron.services.runtime import Context
from jetcron.wire import subjects as s


class Purges:
    """The streams' purges the pruner asks for (storage.remove_run: a run's record with every revision of it, then
    its output)."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, str]] = []

    async def purge(self, stream: str, *, subject: str) -> None:
        self.asked.append((stream, subject))

    def records(self) -> list[str]:
        """The run ids whose record was purged, in order."""
        prefix = s.kv_subject(s.BUCKET_RUNS, "")
        return [subject.removeprefix(prefix) for stream, subject in self.asked if stream == s.kv_stream(s.BUCKET_RUNS)]


def tracker() -> tuple[Context, Purges]:
    ctx = twin_context("run_tracker")
    purges = Purges()
    ctx.streams = cast(Any, purges)
    return ctx, purges


T0 = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
SPEC = JobSpec(name="tick", command=["true"], history=HistoryPolicy(keep_succeeded=1))


def ended(i: int) -> Run:
    at = T0 + timedelta(minutes=i)
    return Run(run_id=f"tick.{i}", job="tick", state=RunState.SUCCEEDED, scheduled_at=at, due_at=at, created_at=at,
               spec=SPEC, started_at=at, finished_at=at)


async def test_the_runs_a_replica_recorded_ending_are_pruned_without_reading_them_back() -> None:
    # Given three succeeded runs of a job that keeps one, each noted as it ended (the record in hand)
    ctx, purges = tracker()
    runs = [ended(i) for i in range(3)]
    for run in runs:
        await ctx.runs.create(run.run_id, run)
    pruner = Pruner(ctx)
    reads: list[str] = []
    maybe = ctx.runs.maybe

    async def counted(key: str) -> Any:
        reads.append(key)
        return await maybe(key)

    ctx.runs.maybe = counted  # type: ignore[method-assign]
    ctx.jobs.maybe = counted  # type: ignore[method-assign]
    for run in runs:
        pruner.noted(run)

    # When its limits are applied, a day later
    let_go = await pruner.prune("tick", T0 + timedelta(days=1), SPEC)

    # Then the two older ones are let go, and neither a run nor the job was read
    assert sorted(let_go) == sorted(purges.records()) == ["tick.0", "tick.1"]
    assert reads == []


async def test_a_run_another_replica_recorded_is_read_once_and_counted() -> None:
    # Given two succeeded runs of the job: one noted here, one recorded ending by another replica
    ctx, purges = tracker()
    mine, theirs = ended(2), ended(1)
    for run in (mine, theirs):
        await ctx.runs.create(run.run_id, run)
    pruner = Pruner(ctx)
    pruner.noted(mine)
    reads: list[str] = []
    maybe = ctx.runs.maybe

    async def counted(key: str) -> Any:
        reads.append(key)
        return await maybe(key)

    ctx.runs.maybe = counted  # type: ignore[method-assign]
    # When its limits are applied
    let_go = await pruner.prune("tick", T0 + timedelta(days=1), SPEC)
    # Then the other replica's run was read, counted, and let go as the older; this replica's was not read
    assert let_go == purges.records() == ["tick.1"]
    assert reads == ["tick.1"]

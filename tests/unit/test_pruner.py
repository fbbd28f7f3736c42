"""The tracker's pruning of a job's count limits (jetcron_services.run_tracker.history.Pruner), on the bus's twins."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import msgspec
from twin_support import twin_context

from jetcron.core.models import HistoryPolicy, JobSpec, Run, RunState, Schedule, ScheduleKind
from jetcron.wire import subjects as s
from jetcron_services.run_tracker.history import PRUNE_AFTER, Pruner
from jetcron_services.runtime import Context


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


def reading(ctx: Context) -> list[str]:
    """The keys of every run or job record read from now on, in order."""
    reads: list[str] = []
    for records in (ctx.runs, ctx.jobs):
        async def counted(key: str, maybe: Any = records.maybe) -> Any:
            reads.append(key)
            return await maybe(key)

        records.maybe = counted  # type: ignore[method-assign]
    return reads


async def test_the_runs_a_replica_recorded_ending_are_pruned_without_reading_them_back() -> None:
    # Given three succeeded runs of a job that keeps one, each noted as it ended (the record in hand)
    ctx, purges = tracker()
    runs = [ended(i) for i in range(3)]
    for run in runs:
        await ctx.runs.create(run.run_id, run)
    clock = [0.0]
    pruner = Pruner(ctx, monotonic=lambda: clock[0])
    reads = reading(ctx)
    for run in runs:
        pruner.noted(run)

    # When the job's limits come due and the pruner applies them
    clock[0] += PRUNE_AFTER
    task = asyncio.create_task(pruner.run())

    async def two_let_go() -> None:
        while len(purges.records()) < 2:
            await asyncio.sleep(0)

    await asyncio.wait_for(two_let_go(), 5)
    ctx.stop.set()
    pruner.wake.set()
    await asyncio.wait_for(task, 5)

    # Then the two older ones are let go, and neither a run nor the job was read (the spec came with the runs)
    assert sorted(purges.records()) == ["tick.0", "tick.1"]
    assert reads == []


async def test_a_run_another_replica_recorded_is_read_once_and_counted() -> None:
    # Given two succeeded runs of the job: one noted here, one recorded ending by another replica
    ctx, purges = tracker()
    mine, theirs = ended(2), ended(1)
    for run in (mine, theirs):
        await ctx.runs.create(run.run_id, run)
    pruner = Pruner(ctx)
    pruner.noted(mine)
    reads = reading(ctx)
    # When its limits are applied
    let_go = await pruner.prune("tick", T0 + timedelta(days=1), SPEC)
    # Then the other replica's run was read, counted, and let go as the older; this replica's was not read
    assert let_go == purges.records() == ["tick.1"]
    assert reads == ["tick.1"]


async def test_a_job_with_no_count_limit_after_all_is_neither_listed_nor_kept() -> None:
    # Given a fresh tracker noting the end of a run whose tenant it has not read yet (it may have a limit)
    ctx, purges = tracker()
    free = JobSpec(name="free", command=["true"])
    run = msgspec.structs.replace(ended(1), run_id="free.1", job="free", spec=free)
    await ctx.runs.create(run.run_id, run)
    pruner = Pruner(ctx)
    listed: list[str] = []
    keys = ctx.runs.keys

    async def listing(pattern: str = ">") -> list[str]:
        listed.append(pattern)
        return await keys(pattern)

    ctx.runs.keys = listing  # type: ignore[method-assign]
    pruner.noted(run)
    # When its limits are applied, and neither the job, its tenant nor the cluster has any
    assert await pruner.prune("free", T0 + timedelta(days=1), free) == []
    # Then nothing was listed or let go, and the pruner keeps nothing of the job
    assert (listed, purges.asked, pruner._ended) == ([], [], {})
    # And a later ending of a run of that tenant is not even noted
    pruner.noted(msgspec.structs.replace(run, run_id="free.2"))
    assert pruner._ended == {}


async def test_a_one_shot_job_once_pruned_is_not_kept() -> None:
    # Given a `now` job that keeps one succeeded run, one of whose runs ended here
    ctx, _ = tracker()
    once = JobSpec(name="once", command=["true"], schedule=Schedule(kind=ScheduleKind.NOW),
                   history=HistoryPolicy(keep_succeeded=1))
    run = msgspec.structs.replace(ended(1), run_id="once.1", job="once", spec=once)
    await ctx.runs.create(run.run_id, run)
    pruner = Pruner(ctx)
    pruner.noted(run)
    # When its limits are applied
    assert await pruner.prune("once", T0 + timedelta(days=1), once) == []
    # Then nothing of it is kept for a next prune (it fires once)
    assert pruner._ended == {}

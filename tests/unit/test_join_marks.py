"""A `latest` join reads what it needs as marks (jetcron.core.lifecycle.join_marks, libs/jetcron/ops/joins.py), one read
each whatever a job's history: an upstream's latest success, when the dependent last took its upstreams' successes, its
waiting run. On the bus's twins with the clock injected: the trigger records thousands of occurrences of a dependent
whose upstream has not succeeded again, the tracker releases on an upstream's success, and repairs a mark a writer died
before raising."""

from __future__ import annotations

import asyncio
import random
from datetime import UTC, datetime, timedelta

import pytest
from twin_support import twin_context

from jetcron.core.clock import ManualClock
from jetcron.core.ids import run_id
from jetcron.core.lifecycle.join_marks import JoinMark, Mark, from_newest, mark_key, raised
from jetcron.core.lifecycle.runs import new_run
from jetcron.core.models import JobRecord, JobSpec, JobStatus, JoinPolicy, Run, RunState, Schedule, ScheduleKind
from jetcron.wire import subjects as s
from jetcron_services.run_tracker import join_mark_upkeep
from jetcron_services.run_tracker.flows import Flows
from jetcron_services.runtime import Context
from jetcron_services.trigger.firing import Firer

T0 = datetime(2026, 12, 5, 12, 0, tzinfo=UTC)
LOAD = JobSpec(name="load", command=["true"], schedule=Schedule(kind=ScheduleKind.AT, at=T0 + timedelta(days=300)))
REPORT = JobSpec(name="report", command=["true"], schedule=Schedule(kind=ScheduleKind.EVERY, every_seconds=1),
                 depends_on=["load"])
CHECKPOINTS = (65, 67, 1_000, 10_000)
"""Occurrences of the dependent at which nothing may have run twice; the 67th is the first that a read of a job's
newest 64 records got wrong (its waiting run and its last run both out of reach)."""


def ended(spec: JobSpec, at: datetime, state: RunState = RunState.SUCCEEDED) -> Run:
    run = new_run(spec, run_id=run_id(spec.key, at), state=RunState.SCHEDULED, scheduled_at=at, due_at=at, now=at)
    return Run(**{**{f: getattr(run, f) for f in run.__struct_fields__}, "state": state, "finished_at": at})


async def runs_of(ctx: Context, job: str) -> list[Run]:
    found = [await ctx.runs.maybe(key) for key in await ctx.runs.keys(s.runs_of_job_filter(job))]
    return sorted((f[0] for f in found if f is not None), key=lambda r: r.run_id)


async def tracking(ctx: Context, *specs: JobSpec) -> tuple[Flows, asyncio.Task[None]]:
    """A tracker's flows over the stored jobs, its jobs watch caught up."""
    for spec in specs:
        await ctx.jobs.put(spec.key, JobRecord(spec=spec, created_at=T0, updated_at=T0))
    flows = Flows(ctx)
    watching = asyncio.ensure_future(flows.watch_jobs())
    for _ in range(100):
        if all(spec.key in flows.jobs for spec in specs if spec.depends_on):
            break
        await asyncio.sleep(0)
    return flows, watching


def test_a_mark_is_only_ever_raised() -> None:
    early, late = JoinMark(at=T0, run_id="a.1"), JoinMark(at=T0 + timedelta(seconds=1), run_id="a.0")
    assert raised(Mark.OK, None, early) == early
    assert raised(Mark.OK, early, late) == late
    assert raised(Mark.OK, late, early) is None  # a late writer never lowers it
    assert raised(Mark.RAN, early, early) is None
    assert raised(Mark.RAN, JoinMark(), early) == early  # over "never"
    assert raised(Mark.RAN, early, JoinMark()) is None
    # a waiting run is the newest by run id (ids order a job's runs by occurrence), whatever its clock said
    assert raised(Mark.WAITING, late, early) == early
    assert raised(Mark.WAITING, early, late) is None


def test_a_mark_made_from_the_newest_records_is_never_below_the_truth() -> None:
    spec = REPORT
    ran = new_run(spec, run_id=run_id(spec.key, T0), state=RunState.SCHEDULED, scheduled_at=T0, due_at=T0, now=T0,
                  released_at=T0 + timedelta(seconds=3))
    skipped = [new_run(spec, run_id=run_id(spec.key, T0 + timedelta(seconds=i)), state=RunState.SKIPPED,
                       scheduled_at=T0, due_at=T0, now=T0 + timedelta(seconds=i)) for i in (9, 8, 7)]
    assert from_newest(Mark.RAN, [*skipped, ran], more=False) == JoinMark(at=T0 + timedelta(seconds=3),
                                                                          run_id=ran.run_id)
    assert from_newest(Mark.RAN, skipped, more=False) == JoinMark()  # every record read: it never ran
    # older records unread: it ran before the oldest read, if ever, so no success before that counts again
    assert from_newest(Mark.RAN, skipped, more=True) == JoinMark(at=T0 + timedelta(seconds=7))
    assert from_newest(Mark.OK, skipped, more=True) == JoinMark()  # its next success counts: it waits, never doubles
    assert from_newest(Mark.WAITING, skipped, more=True) == JoinMark()


async def test_a_dependent_whose_upstream_did_not_succeed_again_runs_once_however_many_occurrences_pass() -> None:
    # Given a report every second on a load that succeeded once, before the report's first occurrence
    clock = ManualClock(T0)
    ctx = twin_context("trigger", clock=clock)
    load = ended(LOAD, T0 - timedelta(minutes=1))
    await ctx.runs.create(load.run_id, load)
    record = JobRecord(spec=REPORT, created_at=T0, updated_at=T0)
    firer = Firer(ctx, random.Random(1))
    cursor, fired = None, 0

    # When the report comes due 10,000 times, the load not succeeding again
    for checkpoint in CHECKPOINTS:
        while fired < checkpoint:
            plan, cursor = await firer.fire(record, cursor, clock.advance(1))
            fired += len(plan.fires)
        # Then only its first occurrence ran, on the load's success; the second waits, every later one is skipped
        runs = await runs_of(ctx, REPORT.key)
        assert [r.state for r in runs[:2]] == [RunState.SCHEDULED, RunState.WAITING], checkpoint
        assert runs[0].released_at is not None and runs[0].released_at > load.finished_at  # type: ignore[operator]
        doubled = [r.run_id for r in runs[2:] if r.state is not RunState.SKIPPED]
        assert not doubled, f"by occurrence {len(runs)}, ran again without a new success of load: {doubled[:3]}"
        assert all(f"join: {runs[1].run_id} still waited" in r.reason for r in runs[2:])

    # And the load's next success releases the waiting occurrence once, however often it is told
    flows, watching = await tracking(ctx, LOAD, REPORT)
    try:
        again = ended(LOAD, clock.advance(1))
        await ctx.runs.create(again.run_id, again)
        for _ in range(2):
            await flows.on_terminal(again)
    finally:
        watching.cancel()
    runs = await runs_of(ctx, REPORT.key)
    assert [r.run_id for r in runs if r.state is RunState.SCHEDULED] == [runs[0].run_id, runs[1].run_id]
    assert runs[1].released_at is not None and runs[1].released_at >= again.finished_at  # type: ignore[operator]


async def test_an_upstream_success_counts_however_many_of_its_runs_failed_since() -> None:
    # Given a job without a schedule of its own joined on the latest successes of c and d
    ctx = twin_context("run_tracker", clock=ManualClock(T0))
    c, d = (JobSpec(name=n, command=["true"], schedule=Schedule(kind=ScheduleKind.EVERY, every_seconds=60))
            for n in "cd")
    e = JobSpec(name="e", command=["true"], depends_on=["c", "d"], join=JoinPolicy.LATEST)
    flows, watching = await tracking(ctx, c, d, e)
    try:
        # When c succeeds once, then fails 100 times, and only then d succeeds
        first = ended(c, T0)
        await ctx.runs.create(first.run_id, first)
        await flows.on_terminal(first)
        for i in range(1, 101):
            failed = ended(c, T0 + timedelta(minutes=i), RunState.FAILED)
            await ctx.runs.create(failed.run_id, failed)
            await flows.on_terminal(failed)
        done = ended(d, T0 + timedelta(hours=2))
        await ctx.runs.create(done.run_id, done)
        await flows.on_terminal(done)
    finally:
        watching.cancel()
    # Then e's run, waiting since c's success, is released on d's: c's success still counts
    (waited,) = await runs_of(ctx, e.key)
    assert waited.state is RunState.SCHEDULED, waited.reason
    assert waited.released_at is not None


async def test_a_mark_a_writer_died_before_raising_is_repaired_from_the_record_by_the_tracker() -> None:
    # Given a tracker whose runs watch delivers a record before its jobs watch has caught up
    ctx = twin_context("run_tracker", clock=ManualClock(T0))
    marks = await ctx.buckets.open(s.BUCKET_JOINS, JoinMark)
    await ctx.jobs.put(LOAD.key, JobRecord(spec=LOAD, created_at=T0, updated_at=T0))
    flows = Flows(ctx)
    early = ended(LOAD, T0)
    flows.seen(early)
    await ctx.jobs.put(REPORT.key, JobRecord(spec=REPORT, created_at=T0, updated_at=T0))
    repairing = asyncio.ensure_future(flows.repair())
    watching = asyncio.ensure_future(flows.watch_jobs())

    async def mark(key: str) -> JoinMark | None:
        for _ in range(100):
            found = await marks.maybe(key)
            if found is not None and not flows._repairs:
                return found[0]
            await asyncio.sleep(0)
        return None

    try:
        # Then the load's success (an upstream of a latest join) is marked once the jobs watch says so
        assert await mark(mark_key(Mark.OK, LOAD.key)) == JoinMark(at=T0, run_id=early.run_id)
        # And a later success, and the report's run stored by a writer that died before raising their marks, are
        # marked from the records the watch delivers; an older record lowers nothing
        later = ended(LOAD, T0 + timedelta(minutes=5))
        took = new_run(REPORT, run_id=run_id(REPORT.key, T0 + timedelta(minutes=6)), state=RunState.SCHEDULED,
                       scheduled_at=T0, due_at=T0, now=T0 + timedelta(minutes=6))
        waits = new_run(REPORT, run_id=run_id(REPORT.key, T0 + timedelta(minutes=7)), state=RunState.WAITING,
                        scheduled_at=T0, due_at=T0, now=T0 + timedelta(minutes=7))
        for run in (later, took, waits, early):
            flows.seen(run)
        assert await mark(mark_key(Mark.OK, LOAD.key)) == JoinMark(at=later.finished_at, run_id=later.run_id)
        assert await mark(mark_key(Mark.RAN, REPORT.key)) == JoinMark(at=took.created_at, run_id=took.run_id)
        assert await mark(mark_key(Mark.WAITING, REPORT.key)) == JoinMark(at=waits.created_at, run_id=waits.run_id)

        async def kept(expected: list[str]) -> list[str]:
            for _ in range(100):
                found = sorted([key for key in await marks.keys() if await marks.maybe(key) is not None])
                if found == expected:
                    break
                await asyncio.sleep(0)
            return found

        # When the report is paused, no one keeps its marks raised, nor its upstream's: they are dropped, but for the
        # run it leaves waiting (found again by its mark alone once it resumes)
        await ctx.jobs.put(REPORT.key, JobRecord(spec=REPORT, created_at=T0, updated_at=T0, status=JobStatus.PAUSED))
        assert await kept([mark_key(Mark.WAITING, REPORT.key)]) == [mark_key(Mark.WAITING, REPORT.key)]
        # and once it is deleted, nothing is kept of it
        await ctx.jobs.put(REPORT.key, JobRecord(spec=REPORT, created_at=T0, updated_at=T0, status=JobStatus.ACTIVE))
        await ctx.jobs.put(REPORT.key, JobRecord(spec=REPORT, created_at=T0, updated_at=T0, status=JobStatus.DELETED))
        assert await kept([]) == []
    finally:
        repairing.cancel()
        watching.cancel()


async def test_a_tracker_that_could_not_keep_every_early_record_reads_the_marks_of_the_flows_jobs_again(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # Given a tracker that keeps one early mark, and more records than that delivered before its jobs watch caught up
    monkeypatch.setattr(join_mark_upkeep, "EARLY_AT_MOST", 1)
    ctx = twin_context("run_tracker", clock=ManualClock(T0))
    plain = ended(JobSpec(name="plain", command=["true"]), T0)
    load = ended(LOAD, T0 + timedelta(minutes=1))
    took = new_run(REPORT, run_id=run_id(REPORT.key, T0 + timedelta(minutes=2)), state=RunState.SCHEDULED,
                   scheduled_at=T0, due_at=T0, now=T0 + timedelta(minutes=2))
    for run in (plain, load, took):
        await ctx.runs.create(run.run_id, run)
    flows = Flows(ctx)
    for run in (plain, load, took):
        flows.seen(run)

    # When the jobs watch catches up
    for spec in (LOAD, REPORT):
        await ctx.jobs.put(spec.key, JobRecord(spec=spec, created_at=T0, updated_at=T0))
    repairing = asyncio.ensure_future(flows.repair())
    watching = asyncio.ensure_future(flows.watch_jobs())
    marks = await ctx.buckets.open(s.BUCKET_JOINS, JoinMark)
    try:
        for _ in range(200):
            if len(await marks.keys()) == 2 and not flows._repairs:
                break
            await asyncio.sleep(0)
        # Then the marks of the flow's jobs are read from their records; the plain job has none
        assert sorted(await marks.keys()) == [mark_key(Mark.OK, LOAD.key), mark_key(Mark.RAN, REPORT.key)]
        assert (await marks.get(mark_key(Mark.OK, LOAD.key)))[0] == JoinMark(at=load.finished_at, run_id=load.run_id)
        assert (await marks.get(mark_key(Mark.RAN, REPORT.key)))[0] == JoinMark(at=took.created_at,
                                                                                 run_id=took.run_id)
    finally:
        repairing.cancel()
        watching.cancel()

"""A `latest` join's runs never take the same upstream success twice (jetcron.core.lifecycle.dag.took_at, and
libs/jetcron/ops/joins.py on the records' twin): a success that ended while a run was being decided, after the
decider's clock was read, is stamped as taken."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from twin_support import twin_context

from jetcron.core.ids import run_id
from jetcron.core.lifecycle import dag
from jetcron.core.lifecycle.join_marks import Mark
from jetcron.core.lifecycle.runs import new_run
from jetcron.core.models import JobSpec, JoinPolicy, Run, RunState
from jetcron.ops.joins import Joins

T0 = datetime(2026, 12, 5, 12, 0, tzinfo=UTC)
E = JobSpec(name="e", command=["true"], depends_on=["c", "d"], join=JoinPolicy.LATEST)


def succeeded(job: str, at: datetime) -> Run:
    spec = JobSpec(name=job, command=["true"])
    run = new_run(spec, run_id=run_id(spec.key, at), state=RunState.SCHEDULED, scheduled_at=at, due_at=at, now=at)
    return Run(**{**{f: getattr(run, f) for f in run.__struct_fields__}, "state": RunState.SUCCEEDED,
                  "finished_at": at})


def test_a_run_is_stamped_no_earlier_than_the_newest_success_it_takes() -> None:
    assert dag.took_at(T0, None) == T0
    assert dag.took_at(T0, T0 - timedelta(seconds=1)) == T0
    assert dag.took_at(T0, T0 + timedelta(milliseconds=5)) == T0 + timedelta(milliseconds=5)


async def test_a_success_that_ended_while_a_run_was_decided_is_not_taken_again_by_the_next() -> None:
    # Given C and D succeeded, D's success ending 5 ms after the decider read its clock (now)
    ctx = twin_context("run_tracker")
    joins = Joins(ctx.runs, ctx.buckets, ctx.log)
    now = T0 + timedelta(seconds=10)
    for job, at in (("c", T0), ("d", now + timedelta(milliseconds=5))):
        run = succeeded(job, at)
        await ctx.runs.create(run.run_id, run)
        await joins.recorded(run, upstream=True)
    pending, newest = await joins.readiness(E)
    assert (pending, newest) == ([], now + timedelta(milliseconds=5))

    # When E's run is recorded ready, stamped as the tracker stamps it
    took = dag.took_at(now, newest)
    e_run = new_run(E, run_id=run_id(E.key, now), state=RunState.SCHEDULED, scheduled_at=now, due_at=now, now=now,
                    released_at=took)
    await ctx.runs.create(e_run.run_id, e_run)
    await joins.recorded(e_run)

    # Then the next decision finds no new success of either: E waits for both again
    assert (await joins.mark(Mark.RAN, E.key)).at == took
    pending, _ = await joins.readiness(E)
    assert pending == ["c", "d"]

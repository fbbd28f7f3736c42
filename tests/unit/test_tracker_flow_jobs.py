"""The tracker holds only the jobs it consults: downstream jobs, and those with a deadline or a wait timeout (not a
day's `now` jobs, kept for days). Flows' jobs watch on the bus's twins; and no run waits on its upstreams without
end: past its job's wait timeout, or the default where the job sets none, it is blocked."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from twin_support import twin_context

from jetcron.core.clock import ManualClock
from jetcron.core.ids import run_id
from jetcron.core.lifecycle.dag import DEFAULT_WAIT_SECONDS
from jetcron.core.lifecycle.runs import new_run
from jetcron.core.models import JobRecord, JobSpec, JoinPolicy, RunState, Schedule, ScheduleKind
from jetcron_services.run_tracker.flow_jobs import consulted
from jetcron_services.run_tracker.flows import Flows

T0 = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)
NOW = Schedule(kind=ScheduleKind.NOW)


def _spec(name: str, **fields: Any) -> JobSpec:
    return JobSpec(name=name, command=["true"], schedule=NOW, **fields)


async def test_only_the_jobs_the_tracker_consults_are_held() -> None:
    ctx = twin_context("run_tracker")
    specs = [_spec("plain"), _spec("down", depends_on=["up"]), _spec("late", start_deadline_seconds=60),
             _spec("slow", finish_deadline_seconds=60), _spec("patient", depends_on=["up"], wait_timeout_seconds=60)]
    for spec in specs:  # the plain one first: the watch delivers in order, so it has been seen once the rest are
        await ctx.jobs.create(spec.key, JobRecord(spec=spec, created_at=T0, updated_at=T0))
    flows = Flows(ctx)
    watching = asyncio.ensure_future(flows.watch_jobs())
    try:
        for _ in range(100):
            if len(flows.jobs) == 4:
                break
            await asyncio.sleep(0)
        assert sorted(flows.jobs) == ["down", "late", "patient", "slow"]
        assert flows.downstream == {"up": {"down", "patient"}}
    finally:
        watching.cancel()
    assert [consulted(spec) for spec in specs] == [False, True, True, True, True]


@pytest.mark.parametrize(("timeout", "after", "said"), [
    pytest.param(None, DEFAULT_WAIT_SECONDS, "604800 s (the default wait_timeout_seconds)", id="default"),
    pytest.param(60.0, 60.0, "60 s", id="its_own"),
])
async def test_a_run_waiting_on_its_upstreams_is_blocked_after_its_wait_timeout_or_the_default(
        timeout: float | None, after: float, said: str) -> None:
    # Given a run of a job joined on its upstream's latest success, waiting since T0
    ctx = twin_context("run_tracker", clock=ManualClock(T0))
    down = _spec("down", depends_on=["up"], join=JoinPolicy.LATEST, wait_timeout_seconds=timeout)
    flows = Flows(ctx)
    flows.jobs[down.key] = JobRecord(spec=down, created_at=T0, updated_at=T0)
    waiting = new_run(down, run_id=run_id(down.key, T0), state=RunState.WAITING, scheduled_at=T0, due_at=T0, now=T0,
                      reason="waiting on upstream jobs: up")
    await ctx.runs.create(waiting.run_id, waiting)
    active = {waiting.run_id: waiting}

    # When the leader looks just before its timeout, then at it
    assert await flows.expire_waits(active, T0 + timedelta(seconds=after - 1)) == 0
    assert (await ctx.runs.get(waiting.run_id))[0].state is RunState.WAITING
    assert await flows.expire_waits(active, T0 + timedelta(seconds=after)) == 1

    # Then it is blocked, saying after how long and why
    blocked, _ = await ctx.runs.get(waiting.run_id)
    assert blocked.state is RunState.BLOCKED
    assert blocked.reason == f"wait timeout: upstream jobs did not allow it within {said} " \
                             "(waiting on upstream jobs: up)"

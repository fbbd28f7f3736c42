"""The tracker holds only the jobs it consults: downstream jobs, and those with a deadline or a wait timeout (not a
day's `now` jobs, kept for days). Flows' jobs watch on the bus's twins."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

from twin_support import twin_context

from jetcron.core.models import JobRecord, JobSpec, Schedule, ScheduleKind
from jetcron.services.run_tracker.flows import Flows, consulted

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

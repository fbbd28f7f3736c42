"""The tracker's hooks: every write is followed by each hook in order, with the record before and after; the
standard ones announce misses, count and dead-letter; the service adds retention and the flows' next steps."""

from __future__ import annotations

import random
from datetime import UTC, datetime

import msgspec
from twin_support import twin_context

from jetcron.core.lifecycle.run_state import RunEvent
from jetcron.core.lifecycle.runs import Change
from jetcron.core.models import JobSpec, Run, RunState
from jetcron.wire import subjects as s
from jetcron_services.run_tracker.hooks.dead_letters import DeadLetters
from jetcron_services.run_tracker.hooks.deadlines import MissedDeadlines
from jetcron_services.run_tracker.hooks.run_metrics import RunMetrics
from jetcron_services.run_tracker.records import Records

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


class Seen:
    def __init__(self, name: str, log: list[tuple[str, RunState, RunState]]) -> None:
        self.name, self.log = name, log

    async def changed(self, old: Run, new: Run) -> None:
        self.log.append((self.name, old.state, new.state))


def running(max_attempts: int = 1) -> Run:
    spec = JobSpec(name="job", command=["true"], retry={"max_attempts": max_attempts})
    return Run(run_id="job.1", job="job", state=RunState.RUNNING, attempt=1, scheduled_at=NOW, due_at=NOW,
               created_at=NOW, spec=spec, agent="a1", agents=["a1"], token=7, started_at=NOW)


FAIL = Change(event=RunEvent.FAIL, attempt=1, token=7, agent="a1", exit_code=3, at=NOW)


async def test_each_hook_sees_every_write_in_order_and_nothing_when_nothing_is_written() -> None:
    ctx = twin_context("run_tracker")
    await ctx.runs.create("job.1", running())
    log: list[tuple[str, RunState, RunState]] = []
    records = Records(ctx, random.Random(0), hooks=[Seen("first", log), Seen("second", log)])
    new = await records.change("job.1", lambda run: FAIL)
    assert new is not None and new.state is RunState.DEAD
    assert log == [("first", RunState.RUNNING, RunState.DEAD), ("second", RunState.RUNNING, RunState.DEAD)]
    assert await records.change("job.1", lambda run: None) is None
    assert len(log) == 2


async def test_the_standard_hooks_dead_letter_once_per_attempt() -> None:
    ctx = twin_context("run_tracker")
    await ctx.runs.create("job.1", running())
    records = Records(ctx, random.Random(0))
    assert [type(h) for h in records.hooks] == [MissedDeadlines, RunMetrics, DeadLetters]
    new = await records.change("job.1", lambda run: FAIL)
    assert new is not None and new.state is RunState.DEAD
    await records.after(running(), new)  # a write applied again publishes nothing new (its message id)
    published = ctx.publisher.on(s.dlq_subject("job"))  # type: ignore[attr-defined]
    assert len(published) == 1
    assert msgspec.json.decode(published[0].data)["run_id"] == "job.1"


async def test_a_retry_is_no_dead_letter() -> None:
    ctx = twin_context("run_tracker")
    await ctx.runs.create("job.1", running(max_attempts=3))
    new = await Records(ctx, random.Random(0)).change("job.1", lambda run: FAIL)
    assert new is not None and (new.state, new.attempt) == (RunState.RETRY_WAIT, 1)
    assert ctx.publisher.on(s.dlq_subject("job")) == []  # type: ignore[attr-defined]

"""The tracker's CAS starts from the watched copy of a run (Store.change); a stale copy never decides what is
written."""

from __future__ import annotations

import random
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

import pytest

from jetcron.bus.kv import Store
from jetcron.core.clock import ManualClock
from jetcron.core.errors import Contended, IllegalTransition, NotFound, WriteConflict
from jetcron.core.lifecycle.run_state import RunEvent
from jetcron.core.lifecycle.runs import Change
from jetcron.core.models import JobSpec, Run, RunState
from jetcron_services.run_tracker.records import Records

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


class Runs:
    """An in-memory twin of the runs bucket's get / revision-checked update (unit test only); its change()
    is Store.change itself, the code under test."""

    name = "jc_runs"
    change = Store.change

    def __init__(self, run: Run, revision: int) -> None:
        self.run, self.revision = run, revision
        self.reads = 0

    async def get(self, run_id: str) -> tuple[Run, int]:
        self.reads += 1
        if run_id != self.run.run_id:
            raise NotFound(f"run {run_id!r} not found")
        return self.run, self.revision

    async def update(self, run_id: str, run: Run, revision: int) -> int:
        if revision != self.revision:
            raise WriteConflict(f"run {run_id}: revision {revision} is not the latest ({self.revision})")
        self.run, self.revision = run, revision + 1
        return self.revision


def a_run(state: RunState) -> Run:
    return Run(run_id="job.1", job="job", state=state, attempt=1, scheduled_at=NOW, due_at=NOW, created_at=NOW,
               spec=JobSpec(name="job", command=["true"]), agent="a1", agents=["a1"], token=7,
               started_at=NOW if state is RunState.RUNNING else None)


def records_over(runs: Runs, known: tuple[Run, int] | None) -> Records:
    ctx: Any = SimpleNamespace(runs=runs, clock=ManualClock(NOW))
    records = Records(ctx, random.Random(1))
    records.known = lambda run_id: known
    return records


FINISH = Change(event=RunEvent.SUCCEED, attempt=1, token=7, agent="a1", outcome="succeeded", at=NOW)


async def test_a_current_copy_is_written_without_a_read() -> None:
    runs = Runs(a_run(RunState.RUNNING), 5)
    new = await records_over(runs, (a_run(RunState.RUNNING), 5)).change("job.1", lambda run: FINISH)
    assert new is not None and new.state is RunState.SUCCEEDED
    assert (runs.reads, runs.revision, runs.run.state) == (0, 6, RunState.SUCCEEDED)


async def test_a_stale_copy_is_refused_by_the_cas_and_the_stored_record_decides() -> None:
    runs = Runs(a_run(RunState.RUNNING), 6)
    new = await records_over(runs, (a_run(RunState.RUNNING), 5)).change("job.1", lambda run: FINISH)
    assert new is not None and new.state is RunState.SUCCEEDED
    assert (runs.reads, runs.revision) == (1, 7)


async def test_a_change_illegal_on_a_stale_copy_is_decided_again_on_the_stored_record() -> None:
    # The watch has not delivered the start yet: a copy still `scheduled` cannot take a finish
    runs = Runs(a_run(RunState.RUNNING), 6)
    new = await records_over(runs, (a_run(RunState.SCHEDULED), 4)).change("job.1", lambda run: FINISH)
    assert new is not None and new.state is RunState.SUCCEEDED and runs.reads == 1


async def test_giving_up_on_a_copy_is_not_final_but_giving_up_on_the_stored_record_is() -> None:
    seen: list[RunState] = []

    def only_if_running(run: Run) -> Change | None:
        seen.append(run.state)
        return FINISH if run.state is RunState.RUNNING else None

    runs = Runs(a_run(RunState.RUNNING), 6)
    assert await records_over(runs, (a_run(RunState.ASSIGNED), 5)).change("job.1", only_if_running) is not None
    assert seen == [RunState.ASSIGNED, RunState.RUNNING]

    runs = Runs(a_run(RunState.ASSIGNED), 6)
    assert await records_over(runs, None).change("job.1", only_if_running) is None
    assert runs.revision == 6, "nothing written"


async def test_an_illegal_change_on_the_stored_record_is_raised() -> None:
    runs = Runs(a_run(RunState.SCHEDULED), 3)
    with pytest.raises(IllegalTransition):
        await records_over(runs, (a_run(RunState.SCHEDULED), 3)).change("job.1", lambda run: FINISH)
    assert runs.revision == 3 and runs.reads == 1


async def test_a_run_that_keeps_changing_under_the_cas_is_contended() -> None:
    class Busy(Runs):
        async def update(self, run_id: str, run: Run, revision: int) -> int:
            raise WriteConflict(f"run {run_id}: someone wrote first")

    runs = Busy(a_run(RunState.RUNNING), 5)
    with pytest.raises(Contended, match=r"jc_runs/job\.1: too many concurrent writers"):
        await records_over(runs, None).change("job.1", lambda run: FINISH)
    assert runs.reads == 8


def test_a_report_naming_another_agent_than_its_sender_is_dropped_as_forged() -> None:
    from jetcron.bus.consume import Drop
    from jetcron.wire.codec import encode
    from jetcron.wire.messages import RunFinished
    from jetcron_services.run_tracker.events import change_for

    report = encode(RunFinished(run_id="job.20261130T120000000Z", attempt=1, token=7, agent="agent-a",
                                outcome="succeeded", exit_code=0, at=datetime(2026, 11, 30, tzinfo=UTC)))
    # The subject's agent is the credential's: agent-b may publish only on jc.event.*.agent-b
    with pytest.raises(Drop, match="names agent agent-a but was sent by agent-b"):
        change_for("finished", report, "agent-b")
    run_id, change, _ = change_for("finished", report, "agent-a")
    assert (run_id, change.agent) == ("job.20261130T120000000Z", "agent-a")

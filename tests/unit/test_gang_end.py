"""How a gang member stops once its run record shows the gang's attempt is over (jetcron.core.lifecycle.gang_end)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from msgspec.structs import replace

from jetcron.core.lifecycle.gang_end import MemberStop, member_stop
from jetcron.core.lifecycle.run_state import RunEvent
from jetcron.core.lifecycle.runs import Change, apply
from jetcron.core.models import AttemptRecord, JobSpec, Run, RunState

T0 = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


def running(attempt: int = 1) -> Run:
    return Run(run_id="r", job="j", state=RunState.RUNNING, attempt=attempt, scheduled_at=T0, due_at=T0,
               created_at=T0, spec=JobSpec(name="j", command=["true"]), agent="a", agents=["a", "b"], token=7,
               started_at=T0)


def test_a_record_still_on_the_attempt_stops_nothing() -> None:
    assert member_stop(running(), 1, T0) is None
    assert member_stop(replace(running(2), state=RunState.ASSIGNED), 2, T0) is None


def test_a_preempted_attempt_stops_with_what_is_left_of_its_grace() -> None:
    # Given the record preempted at T0 with a 5 s grace (the next attempt due at T0 + 5 s)
    preempted = apply(running(), Change(event=RunEvent.PREEMPT, reason="preempted by run h", delay_seconds=5.0), T0)
    # Then a member that sees it 2 s later stops with the 3 s left, SIGTERM first
    assert member_stop(preempted, 1, T0 + timedelta(seconds=2)) == MemberStop(
        "gang attempt 1 is over (run scheduled, attempt 2)", grace=True, grace_seconds=3.0)
    # And one that sees it after the grace still gets SIGTERM, with no time before SIGKILL
    assert member_stop(preempted, 1, T0 + timedelta(seconds=9)) == MemberStop(
        "gang attempt 1 is over (run scheduled, attempt 2)", grace=True, grace_seconds=0.0)


def test_a_preempted_attempt_seen_after_the_next_one_moved_on_stops_with_the_kill_grace() -> None:
    # The next attempt's due time no longer says how long this one's grace was
    preempted = apply(running(), Change(event=RunEvent.PREEMPT, delay_seconds=5.0), T0)
    moved = replace(preempted, attempt=3, state=RunState.RUNNING)
    assert member_stop(moved, 1, T0) == MemberStop("gang attempt 1 is over (run running, attempt 3)", grace=True)


def test_a_cancelled_attempt_stops_with_the_agents_kill_grace() -> None:
    cancelled = apply(running(), Change(event=RunEvent.CANCEL, reason="by alice"), T0)
    assert member_stop(cancelled, 1, T0) == MemberStop("gang attempt 1 is over (run cancelled, attempt 1)",
                                                       grace=True)


@pytest.mark.parametrize(("state", "attempt", "outcome"), [
    pytest.param(RunState.FAILED, 1, "failed", id="another_member_failed"),
    pytest.param(RunState.SCHEDULED, 2, "lost", id="lost_and_retried"),
    pytest.param(RunState.SUCCEEDED, 1, "succeeded", id="succeeded"),
])
def test_any_other_end_kills_at_once(state: RunState, attempt: int, outcome: str) -> None:
    ended = replace(running(), state=state, attempt=attempt, history=[AttemptRecord(attempt=1, outcome=outcome)])
    assert member_stop(ended, 1, T0) == MemberStop(f"gang attempt 1 is over (run {state}, attempt {attempt})",
                                                   grace=False)

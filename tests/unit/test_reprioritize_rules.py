"""Reprioritizing waiting work, as pure decisions: which runs may move (those that have not started), a tenant's
ceiling, and the fair queue serving a moved demand at its new priority while it keeps how long it has waited."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from jetcron.core.errors import Conflict
from jetcron.core.lifecycle.runs import priority_allowed, reprioritized
from jetcron.core.models import JobSpec, Priority, Resources, Run, RunState
from jetcron.core.placing.fairness import FairQueue
from jetcron.core.placing.placement import Demand

T0 = datetime(2026, 12, 5, 12, 0, tzinfo=UTC)
SPEC = JobSpec(name="j", command=["true"], priority=Priority.LOW, queue="batch")


def _run(state: RunState) -> Run:
    return Run(run_id="j.20261205T120000000Z", job="j", state=state, scheduled_at=T0, due_at=T0, created_at=T0,
               spec=SPEC)


@pytest.mark.parametrize("state", [RunState.WAITING, RunState.SCHEDULED, RunState.RETRY_WAIT], ids=str)
def test_a_run_that_has_not_started_moves_and_keeps_its_queue_unless_told(state: RunState) -> None:
    moved = reprioritized(_run(state), Priority.CRITICAL, None)
    assert moved.spec is not None and (moved.spec.priority, moved.spec.queue) == (Priority.CRITICAL, "batch")
    assert moved.state is state
    other = reprioritized(_run(state), Priority.HIGH, "urgent")
    assert other.spec is not None and other.spec.queue == "urgent"


@pytest.mark.parametrize("state", [RunState.ASSIGNED, RunState.RUNNING, *sorted(
    (s for s in RunState if s.terminal), key=str)], ids=str)
def test_a_run_that_started_or_ended_is_refused_saying_so(state: RunState) -> None:
    with pytest.raises(Conflict, match=f"run j.20261205T120000000Z is {state}: only a run that has not started"):
        reprioritized(_run(state), Priority.CRITICAL, None)


@pytest.mark.parametrize(("priority", "ceiling", "allowed"), [
    pytest.param(Priority.CRITICAL, None, True, id="no_ceiling"),
    pytest.param(Priority.HIGH, Priority.HIGH, True, id="at_the_ceiling"),
    pytest.param(Priority.CRITICAL, Priority.HIGH, False, id="above"),
    pytest.param(Priority.LOW, Priority.NORMAL, True, id="below"),
])
def test_a_tenants_ceiling(priority: Priority, ceiling: Priority | None, allowed: bool) -> None:
    assert priority_allowed(priority, ceiling) is allowed


def _demand(run_id: str, priority: Priority, at: datetime, queue: str = "default") -> Demand:
    return Demand(run_id=run_id, tenant="t", priority=priority, resources=Resources(), enqueued_at=at, queue=queue)


def test_a_moved_demand_is_offered_at_its_new_priority_and_keeps_its_age() -> None:
    q = FairQueue(ageing_seconds=300)
    q.push(_demand("a", Priority.NORMAL, T0))
    q.push(_demand("b", Priority.NORMAL, T0 + timedelta(seconds=1)))
    q.push(_demand("c", Priority.LOW, T0 + timedelta(seconds=2)))
    now = T0 + timedelta(seconds=10)
    assert next(q.candidates(now)).run_id == "a"
    assert q.reprioritize("c", Priority.CRITICAL, "default")
    assert next(q.candidates(now)).run_id == "c"
    (item,) = [d for d in q.candidates(now) if d.run_id == "c"]
    assert item.enqueued_at == T0 + timedelta(seconds=2) and len(q) == 3
    assert not q.reprioritize("gone", Priority.HIGH, "default")

"""Placement's books follow the run records: adopt what is out, release when the record moves on."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import msgspec
import pytest

from jetcron.bus.memory import MemoryRpc
from jetcron.config import Settings
from jetcron.core.clock import ManualClock
from jetcron.core.errors import NotFound
from jetcron.core.lifecycle.retry import RetryAction, RetryDecision
from jetcron.core.lifecycle.run_state import RunEvent
from jetcron.core.lifecycle.runs import Change, apply
from jetcron.core.models import AgentInfo, JobSpec, Priority, Resources, Run, RunState
from jetcron.core.placing.placement import Demand
from jetcron_services.placement.service import Placer
from jetcron_services.placement.view import View

T0 = datetime(2026, 1, 1, tzinfo=UTC)
SPEC = JobSpec(name="j", command=["true"], resources=Resources(cpu=2, memory_mb=1024, gpus=1))


def _log(event: str, **fields: object) -> None:
    print(event, fields)


def view() -> View:
    ctx = SimpleNamespace(settings=SimpleNamespace(heartbeat=1.0, placement_ageing_seconds=300.0),
                          log=SimpleNamespace(info=_log, warning=_log))
    v = View(ctx)  # type: ignore[arg-type]
    v.upsert_agent(AgentInfo(agent_id="a", cpu=4, memory_mb=4096, gpus=2, heartbeat_at=T0, started_at=T0))
    return v


def run(state: RunState, attempt: int = 1, agents: tuple[str, ...] = ("a",), gpus: list[int] | None = None) -> Run:
    return Run(run_id="j.20260101T000000000Z", job="j", state=state, attempt=attempt, scheduled_at=T0, due_at=T0,
               created_at=T0, spec=SPEC, agent=agents[0] if agents else None, agents=list(agents),
               gpu_indices={"a": gpus} if gpus is not None else {})


RID = "j.20260101T000000000Z"


def test_a_run_out_on_an_agent_is_counted_until_its_record_ends() -> None:
    v = view()
    # Given a record (from before this replica led) of a run out on agent a with GPU 1
    v.on_record(RID, run(RunState.RUNNING, gpus=[1]), 5)
    # Then its share and its tenant's usage are counted
    assert v.cluster.free("a") == (2.0, 3072, [0])
    assert v.queue.usage("default") == (2.0, 1024, 1)
    # When the record ends
    v.on_record(RID, run(RunState.SUCCEEDED), 6)
    # Then everything is given back
    assert v.cluster.free("a") == (4.0, 4096, [0, 1])
    assert v.queue.usage("default") == (0.0, 0, 0)


def test_an_older_record_does_not_release_the_leaders_own_placement_in_flight() -> None:
    v = view()
    demand = Demand(run_id=RID, tenant="default", priority=Priority.NORMAL, resources=SPEC.resources, enqueued_at=T0)
    v.cluster.place(demand)
    v.hold(demand, 1)
    # While the assign write is in flight, the watch still delivers the scheduled record (a wait reason)
    v.on_record(RID, run(RunState.SCHEDULED, agents=()), 7)
    assert v.cluster.reservation(RID) is not None
    # Once the write is known (revision 9), an older revision changes nothing and a newer one releases
    v.assigned(RID, 9)
    v.on_record(RID, run(RunState.SCHEDULED, agents=()), 8)
    assert v.cluster.reservation(RID) is not None
    v.on_record(RID, run(RunState.ASSIGNED, gpus=[0]), 9)
    v.on_record(RID, run(RunState.SCHEDULED, attempt=2, agents=()), 10)
    assert v.cluster.reservation(RID) is None


def test_a_new_attempt_on_other_agents_replaces_the_old_share() -> None:
    v = view()
    v.upsert_agent(AgentInfo(agent_id="b", cpu=4, memory_mb=4096, gpus=2, heartbeat_at=T0, started_at=T0))
    v.on_record(RID, run(RunState.RUNNING, gpus=[0]), 5)
    v.on_record(RID, run(RunState.ASSIGNED, attempt=2, agents=("b",)), 6)
    assert v.cluster.free("a")[0] == 4.0 and v.cluster.free("b")[0] == 2.0


def test_a_finish_event_releases_early_and_the_stale_running_record_is_not_adopted_again() -> None:
    v = view()
    v.on_record(RID, run(RunState.ASSIGNED), 5)
    v.finished[RID] = 1
    v.release(RID)
    v.on_record(RID, run(RunState.RUNNING), 6)
    assert v.cluster.free("a")[0] == 4.0
    v.on_record(RID, run(RunState.SUCCEEDED), 7)
    assert RID not in v.finished


def test_an_agent_that_comes_back_gets_its_runs_counted_again() -> None:
    v = view()
    v.on_record(RID, run(RunState.RUNNING, gpus=[1]), 5)
    v.forget_agent("a")
    v.upsert_agent(AgentInfo(agent_id="a", cpu=4, memory_mb=4096, gpus=2, heartbeat_at=T0, started_at=T0))
    assert v.cluster.free("a") == (2.0, 3072, [0])


def test_a_record_for_an_agent_not_seen_yet_is_counted_when_it_appears() -> None:
    v = view()
    v.on_record(RID, run(RunState.RUNNING, agents=("late",)), 5)
    assert RID not in v.placed
    v.upsert_agent(AgentInfo(agent_id="late", cpu=4, memory_mb=4096, heartbeat_at=T0, started_at=T0))
    assert v.cluster.free("late")[0] == 2.0


async def test_the_leaders_loops_stop_when_its_leadership_ends_even_if_the_cancel_is_lost() -> None:
    ctx = SimpleNamespace(settings=Settings(), clock=ManualClock(T0), stop=asyncio.Event(), rpc=MemoryRpc())
    v = View(ctx)  # type: ignore[arg-type]
    over = asyncio.Event()
    placer = Placer(ctx, v, over)  # type: ignore[arg-type]
    loop = asyncio.create_task(placer.loop())
    for _ in range(3):
        await asyncio.sleep(0)  # it passed once and waits for the next change
    # When a change arrives (the runs watch sets it all the time under a herd) just as the leadership ends
    v.changed.set()
    over.set()
    loop.cancel()  # Python 3.11's wait_for() swallows this cancel: the event it waited for is set
    # Then the loop still ends (the service is not stopping: it is to lead again once it can)
    done, _ = await asyncio.wait({loop}, timeout=2)
    assert loop in done and not ctx.stop.is_set()


def test_an_agent_whose_run_was_lost_with_its_lease_is_off_the_books_until_a_newer_heartbeat() -> None:
    v = view()
    v.upsert_agent(AgentInfo(agent_id="b", cpu=4, memory_mb=4096, gpus=2, heartbeat_at=T0, started_at=T0))
    other = "k.20260101T000000000Z"
    v.on_record(RID, run(RunState.RUNNING, gpus=[1]), 5)
    v.on_record(other, msgspec.structs.replace(run(RunState.RUNNING, gpus=[0]), run_id=other, job="k"), 6)
    # When the tracker calls a's run lost (its lease lapsed) and queues it again
    lost = apply(run(RunState.RUNNING, gpus=[1]), Change(event=RunEvent.LOSE, reason="lease expired on a",
                                                         retry=RetryDecision(action=RetryAction.RETRY)), T0)
    v.on_record(RID, lost, 7)
    # Then a is off the books at once (nothing is placed there), though not forgotten (still seen)
    with pytest.raises(NotFound):
        v.cluster.free("a")
    assert "a" in v.seen and v.cluster.free("b")[0] == 4.0
    # ... its last heartbeat delivered again does not bring it back
    v.upsert_agent(AgentInfo(agent_id="a", cpu=4, memory_mb=4096, gpus=2, heartbeat_at=T0, started_at=T0))
    with pytest.raises(NotFound):
        v.cluster.free("a")
    # ... a newer one does, with its other run still counted on it
    later = T0 + timedelta(seconds=1)
    v.upsert_agent(AgentInfo(agent_id="a", cpu=4, memory_mb=4096, gpus=2, heartbeat_at=later, started_at=T0))
    assert v.cluster.free("a") == (2.0, 3072, [1])

"""The placement leader's pass with preemption (services/jetcron_services/placement/preempt.py) on its own books: the
waiting run is placed on the room its victims leave in the same pass (nothing else can take it first), its assignment
says what it preempted, the victims are preempted before it is assigned, and a preemption that could not be written puts
everything back. What a preemption writes and what the agent does are tested on the server
(tests/integration/test_preemption.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

from jetcron.bus.memory import MemoryRpc
from jetcron.config import Settings
from jetcron.core.clock import ManualClock
from jetcron.core.errors import Contended
from jetcron.core.models import AgentInfo, JobSpec, Preemption, Priority, Resources, Run, RunState, TenantPolicy
from jetcron.core.placing.placement import Demand, Placement
from jetcron.core.placing.preemption import Holder, Plan
from jetcron.wire.messages import PlaceRun
from jetcron_services.placement.service import Placer
from jetcron_services.placement.view import View

T0 = datetime(2026, 1, 1, tzinfo=UTC)
GPUS8 = Resources(cpu=1, memory_mb=1024, gpus=8)


def placer(policy: Preemption | None = Preemption(min_runtime_seconds=0, grace_seconds=5)) -> tuple[Placer, list[Any]]:
    """A leader on two 8-GPU hosts of leaf l1, whose assignments and preemptions are recorded, not written."""
    log = SimpleNamespace(info=lambda *a, **k: None, warning=lambda *a, **k: None)
    ctx: Any = SimpleNamespace(settings=Settings(), clock=ManualClock(T0 + timedelta(hours=1)), rpc=MemoryRpc(),
                               log=log)
    view = View(ctx)
    for agent in ("agent-1", "agent-2"):
        view.upsert_agent(AgentInfo(agent_id=agent, cpu=8, memory_mb=65536, gpus=8, labels={"leaf": "l1"},
                                    heartbeat_at=T0, started_at=T0))
    for tenant in ("batch", "urgent"):
        p = TenantPolicy(tenant=tenant, preemption=policy if tenant == "batch" else None)
        view.policies[tenant] = p
        view.queue.set_policy(p)
    p = Placer(ctx, view)
    done: list[Any] = []

    async def assign(cmd: PlaceRun, placement: Placement, now: datetime) -> int:
        done.append(("assign", cmd.run_id, placement.agents, placement.gpu_indices, p.preemptor.reason(cmd.run_id)))
        return 1

    async def preempt(demand: Demand, plan: Plan, victim: Holder, now: datetime) -> None:
        done.append(("preempt", victim.run_id, demand.run_id, plan.victim_reason()))

    async def note(run_id: str, cmd: PlaceRun, reason: str, now: datetime) -> None:
        done.append(("wait", run_id, reason))

    p._assign = assign  # type: ignore[method-assign]
    p._write_reason = note  # type: ignore[method-assign]
    p.preemptor._preempt = preempt  # type: ignore[method-assign]
    return p, done


def running(view: View, run_id: str, agents: list[str], *, tenant: str = "batch", started: float = 600) -> None:
    """A run of the tenant's out on its agents, all 8 GPUs of each, as the runs watch delivers it."""
    spec = JobSpec(name=run_id, command=["train"], tenant=tenant, priority=Priority.LOW, resources=GPUS8)
    now = T0 + timedelta(hours=1)
    run = Run(run_id=run_id, job=run_id, tenant=tenant, state=RunState.RUNNING, scheduled_at=T0, due_at=T0,
              created_at=T0, spec=spec, agent=agents[0], agents=agents, token=3,
              gpu_indices={a: list(range(8)) for a in agents}, started_at=now - timedelta(seconds=started))
    view.on_record(run_id, run, 10)


def wait(p: Placer, run_id: str, priority: Priority = Priority.HIGH, *, tenant: str = "urgent",
         res: Resources = GPUS8, attempt: int = 1, due: datetime | None = None) -> None:
    p.hold(PlaceRun(run_id=run_id, attempt=attempt, job=run_id, tenant=tenant, priority=priority, resources=res,
                    due_at=due or T0, staged=due is None), None)


async def test_a_high_run_takes_the_place_of_a_low_gang_holding_every_gpu() -> None:
    # Given a low gang of the preemptible tenant holding both hosts, and a high run waiting for 8 GPUs
    p, done = placer()
    running(p.view, "gang", ["agent-1", "agent-2"])
    wait(p, "urgent-1")

    # When one pass runs
    await p.place_once()

    # Then the gang is preempted first, then the high run assigned on the room it left, saying what it preempted
    assert done == [
        ("preempt", "gang", "urgent-1", "preempted by run urgent-1 (high) to free 8 GPUs on agent-1"),
        ("assign", "urgent-1", ["agent-1"], {"agent-1": list(range(8))},
         "preempting run gang (low) to free 8 GPUs on agent-1")]
    # And the books count the high run, not the gang (whole: both its hosts are free on paper)
    assert set(p.view.placed) == {"urgent-1"}
    assert p.view.cluster.free("agent-2")[2] == list(range(8))
    assert p.preemptor.plans == {}


async def test_the_preempted_runs_next_attempt_does_not_come_back_before_its_grace() -> None:
    # Given the gang preempted for a high run (the run goes on as attempt 2, due once its 5 s grace has passed)
    p, done = placer()
    running(p.view, "gang", ["agent-1", "agent-2"])
    wait(p, "urgent-1")
    await p.place_once()
    now = p.ctx.clock.now()
    p.view.on_record("gang", None, 11)  # (the record moved on: not counted as before)
    wait(p, "gang", Priority.LOW, tenant="batch", attempt=2, due=now + timedelta(seconds=5),
         res=Resources(cpu=1, memory_mb=1024, gpus=8, hosts=2))

    # When a pass runs before its due time, and another after it
    await p.place_once()
    p.ctx.clock.advance(10)
    await p.place_once()
    # Then it waits: its gang needs both hosts, one of which the high run holds; it preempts nothing (high is higher)
    assert [d[:2] for d in done] == [("preempt", "gang"), ("assign", "urgent-1"), ("wait", "gang")]
    assert done[-1][2] == "no leaf with 2 hosts × 8 free GPUs (closest: l1 with 1)"
    assert "gang" in p.held
    # And once the high run has ended, it gets its place back
    p.view.release("urgent-1")
    await p.place_once()
    assert done[-1][:3] == ("assign", "gang", ["agent-1", "agent-2"])


async def test_a_tenant_without_the_policy_is_never_preempted() -> None:
    p, done = placer(policy=None)
    running(p.view, "gang", ["agent-1", "agent-2"])
    wait(p, "urgent-1", Priority.CRITICAL)
    await p.place_once()
    assert done == [] and set(p.view.placed) == {"gang"} and "urgent-1" in p.held


async def test_a_run_under_its_minimum_runtime_is_not_preempted() -> None:
    p, done = placer(policy=Preemption(min_runtime_seconds=3600))
    running(p.view, "gang", ["agent-1", "agent-2"], started=600)
    wait(p, "urgent-1")
    await p.place_once()
    assert done == [] and set(p.view.placed) == {"gang"}


async def test_a_preemption_that_could_not_be_written_puts_everything_back() -> None:
    # Given the victim's record could not be written (contended)
    p, done = placer()
    running(p.view, "gang", ["agent-1", "agent-2"])
    wait(p, "urgent-1")

    async def refuse(demand: Demand, plan: Plan, victim: Holder, now: datetime) -> None:
        raise Contended("jc_runs/gang: too many concurrent writers")

    p.preemptor._preempt = refuse  # type: ignore[method-assign]
    await p.place_once()

    # Then nothing is assigned, the gang counts on both hosts again, and the high run waits for the next pass
    assert done == []
    assert set(p.view.placed) == {"gang"} and p.view.cluster.free("agent-1")[2] == []
    assert "urgent-1" in p.held and "urgent-1" in p.view.queue
    assert p.preemptor.plans == {}


async def test_two_waiting_runs_never_preempt_the_same_run_twice() -> None:
    # Given one low run on agent-1 (agent-2 taken by a run that may not be preempted) and two high runs waiting
    p, done = placer()
    running(p.view, "low", ["agent-1"])
    running(p.view, "kept", ["agent-2"], tenant="urgent")
    wait(p, "urgent-1")
    wait(p, "urgent-2")
    await p.place_once()
    # Then the first takes its place, the second waits
    assert [(d[0], d[1]) for d in done] == [("preempt", "low"), ("assign", "urgent-1")]
    assert "urgent-2" in p.held


async def test_leadership_lost_before_a_plan_was_carried_out_puts_its_victims_back() -> None:
    # Given the high run placed on the gang's room in a pass that leadership ended before the preemption was written
    p, _ = placer()
    running(p.view, "gang", ["agent-1", "agent-2"])
    demand = Demand(run_id="urgent-1", tenant="urgent", priority=Priority.HIGH, resources=GPUS8, enqueued_at=T0)
    placement = p.preemptor.make_room(demand, p.ctx.clock.now())
    assert placement is not None and placement.agents == ["agent-1"]
    p.view.hold(demand, 1)
    assert set(p.view.placed) == {"urgent-1"}

    # When the leader lets go (lead(): the held demands, the assignments in flight, then the plans)
    p.let_go()
    p.view.drop_in_flight()
    p.preemptor.put_back()

    # Then the books count the gang on both hosts again, and nothing else
    assert set(p.view.placed) == {"gang"} and p.preemptor.plans == {}
    assert [p.view.cluster.free(a)[2] for a in ("agent-1", "agent-2")] == [[], []]

"""`jetcron_preemptions_total{queue,reason}` as the placement leader's pass counts a preemption
(services/jetcron_services/placement/preempt.py): one per preempted run, labelled with the preempted run's own queue and
what the waiting run was short of, and nothing for a preemption that did not happen. The pass runs the real preemption
(jetcron.ops.control.preempt_run) on the bus's in-memory twins; only the waiting run's assignment is recorded, not
written."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import msgspec
import pytest
from prometheus_client import REGISTRY

from jetcron.bus.lease import Leases
from jetcron.bus.memory import MemoryLeaseLog, MemoryPublisher, MemoryRecords, MemoryRpc
from jetcron.config import Settings
from jetcron.core.clock import ManualClock
from jetcron.core.models import AgentInfo, JobSpec, Preemption, Priority, Resources, Run, RunState, TenantPolicy
from jetcron.core.placing.placement import Placement
from jetcron.wire import subjects as s
from jetcron.wire.messages import PlaceRun
from jetcron_services.placement.service import Placer
from jetcron_services.placement.view import View

T0 = datetime(2026, 1, 1, tzinfo=UTC)
NOW = T0 + timedelta(hours=1)
METRIC = "jetcron_preemptions_total"


def count(queue: str, reason: str) -> float:
    """The counter's value for these labels (a child never made reads as 0)."""
    return REGISTRY.get_sample_value(METRIC, {"queue": queue, "reason": reason}) or 0.0


def everything() -> dict[tuple[str, str], float]:
    """Every labelled value of the counter, to see that nothing but the expected one moved."""
    return {(x.labels["queue"], x.labels["reason"]): x.value
            for metric in REGISTRY.collect() if metric.name == METRIC.removesuffix("_total")
            for x in metric.samples if x.name == METRIC}


def leader(host: AgentInfo) -> tuple[Placer, Any, list[str]]:
    """A placement leader on one host whose run records, leases, agents and events are the in-memory twins; tenant
    `batch` may be preempted (at once, 5 s of grace), tenant `urgent` may not."""
    log = SimpleNamespace(info=lambda *a, **k: None, warning=lambda *a, **k: None)
    ctx: Any = SimpleNamespace(settings=Settings(), clock=ManualClock(NOW), log=log,
                               runs=MemoryRecords(s.BUCKET_RUNS, Run), leases=Leases(MemoryLeaseLog()),
                               rpc=MemoryRpc(), publisher=MemoryPublisher())
    view = View(ctx)
    view.upsert_agent(host)
    for tenant, preemption in (("batch", Preemption(min_runtime_seconds=0, grace_seconds=5)), ("urgent", None)):
        policy = TenantPolicy(tenant=tenant, preemption=preemption)
        view.policies[tenant] = policy
        view.queue.set_policy(policy)
    p = Placer(ctx, view)
    assigned: list[str] = []

    async def assign(cmd: PlaceRun, placement: Placement, now: datetime) -> int:
        assigned.append(cmd.run_id)
        return 1

    async def note(run_id: str, cmd: PlaceRun, reason: str, now: datetime) -> None:
        pass

    p._assign = assign  # type: ignore[method-assign]
    p._write_reason = note  # type: ignore[method-assign]
    return p, ctx, assigned


async def running(p: Placer, ctx: Any, run_id: str, queue: str, res: Resources, agent: str) -> Run:
    """A low run of tenant batch in `queue`, running on `agent` for 10 minutes: stored, and seen by the view."""
    spec = JobSpec(name=run_id, command=["train"], tenant="batch", priority=Priority.LOW, queue=queue, resources=res)
    run = Run(run_id=run_id, job=run_id, tenant="batch", state=RunState.RUNNING, scheduled_at=T0, due_at=T0,
              created_at=T0, spec=spec, agent=agent, agents=[agent], token=3,
              gpu_indices={agent: list(range(res.gpus))} if res.gpus else {},
              started_at=NOW - timedelta(seconds=600))
    revision = await ctx.runs.create(run_id, run)
    p.view.on_record(run_id, run, revision)
    return run


def wait(p: Placer, run_id: str, res: Resources) -> None:
    """A high run of tenant urgent, in a queue of its own, waiting for placement."""
    p.hold(PlaceRun(run_id=run_id, attempt=1, job=run_id, tenant="urgent", priority=Priority.HIGH, resources=res,
                    queue="interactive", due_at=T0, staged=True), None)


GPU_HOST = AgentInfo(agent_id="agent-1", cpu=8, memory_mb=65536, gpus=8, heartbeat_at=T0, started_at=T0)
CPU_HOST = AgentInfo(agent_id="agent-1", cpu=8, memory_mb=65536, gpus=0, heartbeat_at=T0, started_at=T0)


@pytest.mark.parametrize(("host", "held", "wanted", "reason"), [
    pytest.param(GPU_HOST, Resources(cpu=1, memory_mb=1024, gpus=8), Resources(cpu=1, memory_mb=1024, gpus=8),
                 "gpus", id="gpus"),
    pytest.param(CPU_HOST, Resources(cpu=8, memory_mb=1024), Resources(cpu=4, memory_mb=1024), "cpu", id="cpu"),
    pytest.param(CPU_HOST, Resources(cpu=1, memory_mb=65536), Resources(cpu=1, memory_mb=32768), "memory",
                 id="memory"),
])
async def test_a_preemption_counts_once_under_the_preempted_runs_queue_and_what_was_short(
        host: AgentInfo, held: Resources, wanted: Resources, reason: str) -> None:
    # Given a low run of queue `training` holding what a high run waiting in queue `interactive` needs
    p, ctx, assigned = leader(host)
    await running(p, ctx, "victim", "training", held, "agent-1")
    wait(p, "urgent-1", wanted)
    before = everything()

    # When one pass runs
    await p.place_once()

    # Then the victim really was preempted (its record is its next attempt, waiting out the grace), the high run
    # assigned, and the preemption on the audit trail
    record, _ = await ctx.runs.get("victim")
    assert (record.state, record.attempt, assigned) == (RunState.SCHEDULED, 2, ["urgent-1"])
    assert [msgspec.json.decode(m.data)["run_id"] for m in ctx.publisher.on(
        s.event_subject("preempted", s.PLACEMENT_SOURCE))] == ["victim"]
    # And the counter moved by exactly one, under the preempted run's queue (not the waiting run's) and the reason
    after = everything()
    assert after[("training", reason)] == before.get(("training", reason), 0.0) + 1
    assert {k: v for k, v in after.items() if k != ("training", reason)} == {
        k: v for k, v in before.items() if k != ("training", reason)}
    assert count("interactive", reason) == 0.0


async def test_a_preemption_that_did_not_happen_is_not_counted() -> None:
    # Given the victim as the view last saw it, whose record has meanwhile ended (the view not told yet)
    p, ctx, assigned = leader(GPU_HOST)
    gpus = Resources(cpu=1, memory_mb=1024, gpus=8)
    run = await running(p, ctx, "victim", "training", gpus, "agent-1")
    _, revision = await ctx.runs.get("victim")
    await ctx.runs.update("victim", msgspec.structs.replace(run, state=RunState.SUCCEEDED, finished_at=NOW),
                          revision)
    wait(p, "urgent-1", gpus)
    before = everything()

    # When the pass plans to preempt it
    await p.place_once()

    # Then the preemption writes nothing (the run ended by itself: its place is free anyway), and counts nothing
    assert assigned == ["urgent-1"]
    assert (await ctx.runs.get("victim"))[0].state is RunState.SUCCEEDED
    assert ctx.publisher.on(s.event_subject("preempted", s.PLACEMENT_SOURCE)) == []
    assert everything() == before

"""The placement leader's pass serves runs in the fair queue's order: priority, then the tenants by weight, then a
tenant's named queues in turn. The pass must charge each placed run while the queue's candidates are still being
offered (a list of candidates taken first spent no deficit and turned no queue: the first tenant and queue were
served until they ran dry). tests/integration/test_placement_fairness.py checks the same through the services.
The leader's loop leaves itself free after a pass only for as long as the pass held it deciding, not for the
writes it then awaited."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

import pytest

from jetcron.bus.memory import MemoryRpc
from jetcron.config import Settings
from jetcron.core.clock import ManualClock
from jetcron.core.models import AgentInfo, Preemption, Priority, Resources, TenantPolicy
from jetcron.core.placing.placement import Demand, Placement, Unplaced
from jetcron.core.timing import pacing
from jetcron.core.timing.pacing import SLOW_PASS, TokenBucket, pause_after
from jetcron.wire.messages import PlaceRun
from jetcron_services.placement.service import REASONS_PER_SECOND, Placer
from jetcron_services.placement.view import View

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def placer(slots: int | None) -> tuple[Placer, list[str]]:
    """A leader's Placer on one agent, a and b weighted 2 and 1; what it assigns is recorded, not written."""
    ctx: Any = SimpleNamespace(settings=Settings(), clock=ManualClock(T0), rpc=MemoryRpc(),
                               log=SimpleNamespace(info=print, warning=print))
    view = View(ctx)
    view.upsert_agent(AgentInfo(agent_id="agent-1", cpu=64, memory_mb=65536, slots=slots, heartbeat_at=T0,
                                started_at=T0))
    view.queue.set_policy(TenantPolicy(tenant="a", weight=2))
    view.queue.set_policy(TenantPolicy(tenant="b", weight=1))
    p = Placer(ctx, view)
    assigned: list[str] = []

    async def assign(cmd: PlaceRun, placement: Placement, now: datetime) -> int:
        assigned.append(cmd.run_id)
        return 1  # the revision of the assign write

    p._assign = assign  # type: ignore[method-assign]
    runs = [("low", "a", Priority.LOW, "default")]
    runs += [(f"{q}-{i}", "a", Priority.NORMAL, q) for q in ("x", "y") for i in range(3)]
    runs += [(f"b-{i}", "b", Priority.NORMAL, "default") for i in range(6)]
    runs += [("critical", "b", Priority.CRITICAL, "default")]
    for run_id, tenant, priority, queue in runs:  # queued in the order first-come-first-served would get wrong
        p.hold(PlaceRun(run_id=run_id, attempt=1, job=run_id, tenant=tenant, priority=priority,
                        resources=Resources(cpu=0.1), due_at=T0, staged=True, queue=queue), None)
    return p, assigned


FAIR = ["critical", "x-0", "y-0", "b-0", "x-1", "y-1", "b-1", "x-2", "y-2", "b-2", "b-3", "b-4", "b-5", "low"]


async def test_one_pass_with_room_for_all_assigns_in_fair_order() -> None:
    p, assigned = placer(slots=None)
    await p.place_once()
    assert assigned == FAIR


async def test_one_slot_freed_at_a_time_assigns_in_fair_order() -> None:
    # Given one slot: each pass places one run, the others are tried and skipped (no room)
    p, assigned = placer(slots=1)
    while p.held:
        before = len(assigned)
        await p.place_once()
        await p.place_once()  # a pass with the slot still taken changes nothing
        assert len(assigned) == before + 1
        p.view.release(assigned[-1])  # the run ended: its slot and quota are free again
    assert assigned == FAIR


async def test_a_backlog_behind_a_full_agent_has_its_reasons_written_a_bounded_number_per_second() -> None:
    # Given 14 runs held and 90 more, the one agent's only slot taken, all queued over a second ago
    p, assigned = placer(slots=1)
    for i in range(90):
        p.hold(PlaceRun(run_id=f"more-{i:02d}", attempt=1, job="more", tenant="b", priority=Priority.LOW,
                        resources=Resources(cpu=0.1), due_at=T0, staged=True), None)
    await p.place_once()
    assert assigned == ["critical"]
    written: list[str] = []

    async def write_reason(run_id: str, cmd: PlaceRun, reason: str, now: datetime) -> None:
        written.append(run_id)

    p._write_reason = write_reason  # type: ignore[method-assign]
    p.ctx.clock.advance(2)

    # When passes find them still waiting: together they write at most REASONS_PER_SECOND reasons a second, the
    # queue's first first (the normal-priority runs, then low ones)
    await p.place_once()
    assert len(written) == REASONS_PER_SECOND and set(written[:12]) == set(FAIR[1:-1])
    await p.place_once()
    assert len(written) == REASONS_PER_SECOND  # the budget is spent until the clock refills it
    p.ctx.clock.advance(1)
    await p.place_once()
    assert len(written) == 103 and sorted(written) == sorted(p.held)
    # Then a reason once written is not written again while it stands
    p.ctx.clock.advance(1)
    await p.place_once()
    assert len(written) == 103 and assigned == ["critical"]


def looked_at(p: Placer) -> list[str]:
    """The demands each pass takes from the fair queue from now on, in order."""
    seen: list[str] = []
    candidates = p.view.queue.candidates

    def counted(now: datetime) -> Iterator[Demand]:
        for demand in candidates(now):
            seen.append(demand.run_id)
            yield demand

    p.view.queue.candidates = counted  # type: ignore[method-assign]
    return seen


async def test_a_pass_with_no_slot_anywhere_stops_at_the_head_of_the_queue_once_its_reasons_are_written() -> None:
    # Given the one slot taken by the first pass and no reason to write (the budget spent)
    p, assigned = placer(slots=1)
    await p.place_once()
    assert assigned == ["critical"]
    p.reasons.tokens = 0.0
    seen = looked_at(p)

    # When the next pass runs, it takes one demand from the queue, not the 13 waiting: none could be placed
    await p.place_once()
    assert seen == ["x-0"] and assigned == ["critical"]

    # Then once the slot is free again, the pass places the next run in the fair order
    p.view.release("critical")
    await p.place_once()
    assert assigned == ["critical", "x-0"]


async def test_a_pass_walks_on_while_some_slot_is_free_and_places_a_small_run_behind_large_ones() -> None:
    # Given one agent with 1 cpu free and every run held needing 2 but the last
    p, assigned = placer(slots=None)
    p.view.upsert_agent(AgentInfo(agent_id="agent-1", cpu=1, memory_mb=65536, heartbeat_at=T0, started_at=T0))
    for run_id in list(p.held):
        p._unqueue(run_id)
    for i in range(50):
        p.hold(PlaceRun(run_id=f"big-{i:02d}", attempt=1, job="big", tenant="a", priority=Priority.NORMAL,
                        resources=Resources(cpu=2), due_at=T0, staged=True), None)
    p.hold(PlaceRun(run_id="small", attempt=1, job="small", tenant="a", priority=Priority.NORMAL,
                    resources=Resources(cpu=0.5), due_at=T0, staged=True), None)
    p.reasons.tokens = 0.0

    # When a pass runs, it looks past the fifty that do not fit and places the small one
    seen = looked_at(p)
    await p.place_once()
    assert assigned == ["small"] and len(seen) == 51


async def test_a_pass_with_no_slot_walks_on_while_some_tenant_lets_its_runs_be_preempted() -> None:
    # Given the one slot taken, no reason to write, and a tenant whose runs may be preempted
    p, assigned = placer(slots=1)
    await p.place_once()
    p.view.policies["b"] = TenantPolicy(tenant="b", weight=1, preemption=Preemption(enabled=True))
    p.reasons.tokens = 0.0
    seen = looked_at(p)

    # When the next pass runs, every waiting run is tried: a higher-priority one may take a preemptible run's place
    await p.place_once()
    assert len(seen) == 13 and assigned == ["critical"]


class Held:
    """The timer a pass's deciding is measured by, moved by the test: how long the event loop was held."""

    def __init__(self) -> None:
        self.seconds = 0.0

    def __call__(self) -> float:
        return self.seconds


async def one_loop_pass(p: Placer) -> list[float]:
    """Run the leader's loop for one pass; the waits it makes after that pass, in seconds."""
    paused: list[float] = []

    async def pause(seconds: float) -> None:
        paused.append(seconds)

    p.pause = pause
    p.acted = lambda now: p.over.set()  # the pass is done: the leadership ends with it
    await p.loop()
    return paused


async def test_a_pass_bound_by_its_writes_is_followed_at_once_by_the_next() -> None:
    # Given a pass whose deciding is quick and whose 14 assignments take a second each to be written
    p, assigned = placer(slots=None)
    held = p.timer = Held()
    write = p._assign

    async def slow_write(cmd: PlaceRun, placement: Placement, now: datetime) -> int | None:
        held.seconds += 1.0
        return await write(cmd, placement, now)

    p._assign = slow_write  # type: ignore[method-assign]
    # When the leader's loop runs it: all 14 are assigned, and the loop does not wait before the next pass (the
    # loop was free while the writes were awaited; a wait as long as them halved a backlog's assignments)
    assert await one_loop_pass(p) == []
    assert assigned == FAIR and held.seconds == 14.0


async def test_a_pass_slow_to_decide_leaves_the_loop_free_as_long_after_it() -> None:
    # Given a pass whose fitting takes 20 ms a run: 280 ms deciding 14 runs, the loop held throughout
    p, assigned = placer(slots=None)
    held = p.timer = Held()
    fit = p.view.cluster.place

    def slow_fit(demand: Demand) -> Placement | Unplaced:
        held.seconds += 0.02
        return fit(demand)

    p.view.cluster.place = slow_fit  # type: ignore[method-assign]
    # When the leader's loop runs it: it then waits as long as it decided, past SLOW_PASS
    paused = await one_loop_pass(p)
    assert paused == [pytest.approx(0.28)] and SLOW_PASS < 0.28
    assert assigned == FAIR


def test_a_pass_with_nothing_placeable_walks_on_only_for_reasons_left_and_only_so_far() -> None:
    limit = pacing.WALK_PAST_FULL
    assert [pacing.walk_on_when_full(1, left) for left in (0, 1)] == [False, True]
    assert [pacing.walk_on_when_full(n, 10) for n in (limit, limit + 1)] == [True, False]


def test_the_pause_after_a_pass_is_its_deciding_past_slow_pass_and_at_most_half_a_second() -> None:
    assert [pause_after(s) for s in (0.0, SLOW_PASS, 0.2, 3.0)] == [0.0, 0.0, 0.2, 0.5]


async def test_with_no_slot_anywhere_only_the_head_of_a_backlog_is_walked_for_its_reasons(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # Given the one slot taken, 13 runs waiting over a second, a budget for every reason, and a walk of 5 past full
    monkeypatch.setattr(pacing, "WALK_PAST_FULL", 5)
    p, assigned = placer(slots=1)
    await p.place_once()
    p.reasons = TokenBucket.full(1000.0, T0.timestamp())
    written: list[str] = []

    async def write_reason(run_id: str, cmd: PlaceRun, reason: str, now: datetime) -> None:
        written.append(run_id)

    p._write_reason = write_reason  # type: ignore[method-assign]
    p.ctx.clock.advance(2)
    seen = looked_at(p)

    # When a pass runs, it looks at the five nearest their turn (and the one it stops at), and notes their reasons
    await p.place_once()
    assert len(seen) == 6 and written == seen[:5] and assigned == ["critical"]

    # Then once the head moves on (the slot free, the next run placed), the next run in the queue gets its reason
    p.view.release("critical")
    await p.place_once()
    assert assigned == ["critical", seen[0]]
    assert len(written) == 6 and written[5] not in written[:5]


async def test_a_herd_staged_over_two_ageing_periods_is_served_by_its_tenants_weights_from_its_instant() -> None:
    # Given runs of tenants a (weight 2) and b (weight 1), all due at one instant, staged one every 20 s over the
    # 600 s before it (two ageing periods), and one slot freed at a time from the instant on
    p, assigned = placer(slots=1)
    for run_id in list(p.held):
        p._unqueue(run_id)

    async def write_reason(run_id: str, cmd: PlaceRun, reason: str, now: datetime) -> None:
        pass  # reasons are not what this test is about

    p._write_reason = write_reason  # type: ignore[method-assign]
    clock = p.ctx.clock
    clock.advance(-600)
    for i in range(30):
        tenant = "ab"[i % 2]
        p.hold(PlaceRun(run_id=f"{tenant}-{i:02d}", attempt=1, job=tenant, tenant=tenant, priority=Priority.NORMAL,
                        resources=Resources(cpu=0.1), due_at=T0, staged=True), None)
        clock.advance(20)
    p.view.upsert_agent(AgentInfo(agent_id="agent-1", cpu=64, memory_mb=65536, slots=0, heartbeat_at=T0,
                                  started_at=T0))
    await p.place_once()  # staged runs are assigned as soon as they fit: none fits before the instant
    p.view.upsert_agent(AgentInfo(agent_id="agent-1", cpu=64, memory_mb=65536, slots=1, heartbeat_at=T0,
                                  started_at=T0))

    # When twelve runs start one after the other, from the instant on
    for _ in range(12):
        await p.place_once()
        p.view.release(assigned[-1])

    # Then they start by weight, 2 : 1, not by how long before the instant each was staged
    assert [r[0] for r in assigned] == list("aabaabaabaab")

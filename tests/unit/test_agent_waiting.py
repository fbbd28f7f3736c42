"""An agent's staged attempts wait in one due-time index (services/jetcron_services/agent/waiting), not as tasks."""

from __future__ import annotations

import asyncio
import gc
import time
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any, cast

import pytest
from opentelemetry.context import Context as TraceContext

from jetcron.bus.lease import Lease, LeaseValue
from jetcron.config import Settings
from jetcron.core.clock import ManualClock
from jetcron.core.lifecycle.attempt_state import AttemptEvent, AttemptPhase
from jetcron.core.models import JobSpec, Run, RunState
from jetcron.wire.messages import AssignRun
from jetcron_services.agent.attempt import Attempt
from jetcron_services.agent.attempt_deps import AttemptDeps
from jetcron_services.agent.gang import GangMember
from jetcron_services.agent.host.offer import HostSetup
from jetcron_services.agent.host.strays import StrayGuard
from jetcron_services.agent.reports import ReportWindow
from jetcron_services.agent.waiting import Settled, Waiting
from jetcron_services.runtime import Context

T0 = datetime(2026, 12, 31, 23, 50, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def waiting(clock: ManualClock, burst: int = 256) -> tuple[Waiting[str], list[str], list[Settled]]:
    started: list[str] = []
    settlers: list[Settled] = []

    def start(key: str, settled: Settled) -> None:
        started.append(key)
        settlers.append(settled)
    return Waiting(clock, start, burst), started, settlers


async def test_items_start_in_due_order_once_their_time_has_come() -> None:
    clock = ManualClock(T0)
    w, started, _ = waiting(clock)
    for key, due in (("c", 30), ("a", 10), ("b", 20), ("a2", 10)):
        w.add(key, at(due), key)
    assert (await w.start_due(), started, len(w)) == (0, [], 4)
    clock.set(at(20))
    assert (await w.start_due(), started, len(w)) == (3, ["a", "a2", "b"], 1)
    clock.set(at(99))
    assert (await w.start_due(), started) == (1, ["a", "a2", "b", "c"])
    assert await w.start_due() == 0  # each item starts once


async def test_a_herd_due_at_once_starts_as_a_stream_of_at_most_burst_unsettled_items() -> None:
    clock = ManualClock(T0)
    w, started, settlers = waiting(clock, burst=3)
    for i in range(7):
        w.add(f"r{i}", T0, f"r{i}")
    starting = asyncio.create_task(w.start_due())
    await asyncio.sleep(0)
    assert started == ["r0", "r1", "r2"]  # the fourth waits for room
    settlers[0]()
    settlers[0]()  # settling twice frees one place, not two
    await asyncio.sleep(0)
    assert started == ["r0", "r1", "r2", "r3"]
    for settle in settlers[1:4]:
        settle()
    assert await asyncio.wait_for(starting, timeout=5) == 7  # all due items, in order
    assert (started, len(w)) == ([f"r{i}" for i in range(7)], 0)


async def test_taken_back_items_never_start() -> None:
    clock = ManualClock(T0)
    w, started, _ = waiting(clock)
    w.add("cancelled", at(5), "cancelled")
    w.add("kept", at(5), "kept")
    assert (w.take_back("cancelled"), w.take_back("cancelled"), "cancelled" in w) == ("cancelled", None, False)
    clock.set(at(6))
    await w.start_due()
    assert started == ["kept"]


async def test_take_all_empties_it_for_a_draining_agent() -> None:
    clock = ManualClock(T0)
    w, started, _ = waiting(clock)
    w.add("x", at(5), "x")
    w.add("y", at(1), "y")
    assert sorted(w.take_all()) == ["x", "y"]
    clock.set(at(9))
    assert (await w.start_due(), started, len(w)) == (0, [], 0)


async def test_the_loop_starts_an_item_added_while_it_sleeps_for_a_later_one() -> None:
    clock = ManualClock(T0)
    done = asyncio.Event()
    started: list[str] = []

    def start(key: str, settled: Settled) -> None:
        started.append(key)
        done.set()

    w: Waiting[str] = Waiting(clock, start)
    w.add("later", at(3600), "later")  # the loop sleeps towards this one
    stop = asyncio.Event()
    loop = asyncio.create_task(w.run(stop))
    await asyncio.sleep(0)
    w.add("due-now", T0, "due-now")  # earlier: wakes the loop at once
    await asyncio.wait_for(done.wait(), timeout=5)
    stop.set()
    await asyncio.wait_for(loop, timeout=5)
    assert (started, len(w)) == (["due-now"], 1)


def test_records_held_in_bulk_are_not_tracked_by_the_cycle_collector() -> None:
    # A staged herd holds these by the hundred thousand in one process; tracked, every full collection walked
    # them all (pauses of seconds). They are plain data, with no way to form a cycle.
    spec = JobSpec(name="j", command=["true"])
    held = [
        spec,
        AssignRun(run_id="r", attempt=1, job="j", agent="a", spec=spec, scheduled_at=T0, due_at=T0),
        Run(run_id="r", job="j", state=RunState.SCHEDULED, attempt=1, scheduled_at=T0, due_at=T0, created_at=T0,
            spec=spec),
        Lease(key="k", token=1, value=LeaseValue(holder="a")),
    ]
    assert [type(r).__name__ for r in held if gc.is_tracked(r)] == []


class _HeldAcks:
    """A publisher whose acks wait until released: the tracker's side of a herd, slow to take reports in."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.sent: list[str] = []

    async def publish(self, subject: str, message: Any, **_: Any) -> int:
        self.sent.append(subject)
        await self.release.wait()
        return len(self.sent)


HERD = 40


async def test_a_herd_starts_first_and_its_reports_follow_within_the_window() -> None:
    clock = ManualClock(T0)
    js = _HeldAcks()
    ctx = cast(Context, SimpleNamespace(settings=Settings(agent_sim=True), clock=clock, publisher=js))
    window = ReportWindow(2, hold=3600)
    spec = JobSpec(name="j", command=["true"])
    deps = AttemptDeps(strays=cast(StrayGuard, None), setup=cast(HostSetup, None), reports=window)
    attempts = [Attempt(ctx, deps, AssignRun(run_id=f"r{i}", attempt=1, job="j", agent="a", spec=spec,
                                             scheduled_at=T0, due_at=T0),
                        Lease(key=f"k{i}", token=i + 1, value=LeaseValue(holder="a")), dict, TraceContext())
                for i in range(HERD)]
    tasks: list[asyncio.Task[None]] = []
    sent_before_launch: list[int] = []

    def launch(attempt: Attempt, settled: Settled) -> None:
        sent_before_launch.append(len(js.sent))
        tasks.append(asyncio.create_task(attempt.run(settled)))

    w: Waiting[Attempt] = Waiting(clock, launch, burst=2, reports=window)
    for a in attempts:
        w.add(a.cmd.run_id, T0, a)
    try:
        # No report is acknowledged yet, and still every attempt starts: a burst of 2 is room to start, not to report
        assert await asyncio.wait_for(w.start_due(), timeout=5) == HERD
        # and no report went out while the herd was starting: the tracker's work waits for the starts
        assert sent_before_launch == [0] * HERD
        for _ in range(5):
            await asyncio.sleep(0)
        assert [a.started_at for a in attempts] == [T0] * HERD
        assert js.sent == ["jc.event.finished.a"] * 2  # the window: two reports in flight, the rest wait for room
    finally:
        js.release.set()
        await asyncio.wait_for(asyncio.gather(*tasks), timeout=5)
    # every one reported its success and ended, leaving its lease to expire (this ctx has no leases to release)
    assert (js.sent, {a.phase for a in attempts}) == (["jc.event.finished.a"] * HERD, {AttemptPhase.ENDED})


async def test_reports_held_by_a_herd_go_out_after_the_hold_even_if_it_is_still_starting() -> None:
    window = ReportWindow(4, hold=0.01)
    window.starting()
    assert not window.quiet
    async with asyncio.timeout(5):  # the hold ends it, though started() never comes
        async with window:
            pass
    assert window.quiet
    window.starting()  # the same herd: the hold is not restarted, reports keep going
    assert window.quiet
    window.started()
    window.starting()  # the next herd holds them again
    assert not window.quiet


async def test_the_report_window_counts_what_waits_and_is_in_flight() -> None:
    window = ReportWindow(1, hold=0.0)
    inside, leave = asyncio.Event(), asyncio.Event()

    async def slow_report() -> None:
        async with window:
            inside.set()
            await leave.wait()

    async def report() -> None:
        async with window:
            pass

    # Given one report in flight and one waiting for room behind it: both count (the heartbeat says so)
    first, second = asyncio.create_task(slow_report()), asyncio.create_task(report())
    await inside.wait()
    assert window.queued == 2
    leave.set()
    await asyncio.gather(first, second)
    assert window.queued == 0
    # A report whose publish is cancelled (the agent stopping) does not stay counted
    leave.clear()
    stuck = asyncio.create_task(slow_report())
    waiting = asyncio.create_task(report())
    await asyncio.sleep(0)
    assert window.queued == 2
    stuck.cancel()
    waiting.cancel()
    await asyncio.gather(stuck, waiting, return_exceptions=True)
    assert window.queued == 0


class _Renewals:
    """Leases whose renewals are recorded with the TTL they asked for."""

    def __init__(self) -> None:
        self.asked: list[float] = []

    async def renew(self, lease: Lease, ttl: float) -> Lease:
        self.asked.append(ttl)
        return Lease(key=lease.key, token=lease.token + 1, value=lease.value)


def attempt_due_for_renewal(leases: _Renewals, kind: type[Attempt] = Attempt) -> Attempt:
    """An attempt whose 10 s lease was written 5 s ago: its first renewal is due now."""
    ctx = cast(Context, SimpleNamespace(settings=Settings(run_lease_ttl=10.0), clock=ManualClock(T0),
                                        leases=leases, log=SimpleNamespace(info=lambda *a, **k: None)))
    spec = JobSpec(name="j", command=["true"])
    return kind(ctx, AttemptDeps(strays=cast(StrayGuard, None), setup=cast(HostSetup, None)),
                AssignRun(run_id="r", attempt=1, job="j", agent="a", spec=spec, scheduled_at=T0, due_at=T0),
                Lease(key="k", token=1, value=LeaseValue(holder="a")), dict, TraceContext(),
                granted=10.0, asked_at=time.monotonic() - 5.0)


def _child_ended(attempt: Attempt) -> None:
    """Its child ran and has ended: its finish report is next."""
    for event in (AttemptEvent.LAUNCH, AttemptEvent.SPAWN, AttemptEvent.EXIT):
        attempt._apply(event)


async def _keeper_turns(attempt: Attempt, leases: _Renewals) -> None:
    keeper = asyncio.create_task(attempt.keep_lease())
    for _ in range(20):
        await asyncio.sleep(0)
    attempt.done.set()
    attempt.claim.wake.set()
    await asyncio.wait_for(keeper, timeout=5)


@pytest.mark.parametrize(("ended", "asked"), [
    # its child may still run: renewed, so that it is fenced in time if the agent is cut off
    pytest.param(False, [10.0], id="running_renews"),
    # its child has ended: nothing to fence, and its queued report is covered by the agent's heartbeat
    pytest.param(True, [], id="ended_no_longer_renews"),
])
async def test_the_lease_keeper_renews_only_while_the_child_may_run(ended: bool, asked: list[float]) -> None:
    leases = _Renewals()
    attempt = attempt_due_for_renewal(leases)
    if ended:
        _child_ended(attempt)
    await _keeper_turns(attempt, leases)
    assert leases.asked == asked


async def test_a_gang_attempt_still_renews_while_it_reports() -> None:
    # The tracker judges a gang by its members' own leases, which no heartbeat stands in for
    leases = _Renewals()
    attempt = attempt_due_for_renewal(leases, GangMember)
    _child_ended(attempt)
    await _keeper_turns(attempt, leases)
    assert leases.asked == [10.0]


async def test_the_end_of_the_child_stops_a_keeper_that_has_not_started() -> None:
    leases = _Renewals()
    attempt = attempt_due_for_renewal(leases)
    attempt.claim.arm(attempt)
    attempt._apply(AttemptEvent.LAUNCH)
    attempt._exited()
    await asyncio.sleep(0.05)
    assert (attempt.claim.keeper, leases.asked) == (None, [])


@pytest.mark.parametrize(("left", "wait"), [(5.0, 4.95), (0.05, 0.05), (0.01, 0.01), (0.0, 0.0), (-1.0, 0.0)],
                         ids=["far_coarse", "at_margin_precise", "near_precise", "due", "late"])
def test_a_wait_sleeps_coarsely_to_the_margin_then_precisely(left: float, wait: float) -> None:
    from jetcron.core.clock import next_wait

    assert next_wait(left) == pytest.approx(wait)

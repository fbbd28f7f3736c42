"""The reconciler's sweep looks at a run only when something could have happened to it: a live lease is read
once per grant (its own TTL, which for a staged run covers the wait), not every sweep.

On the bus's twins (jetcron.bus.memory, twin_support.py): the leases are the real ones (jetcron.bus.lease.Leases) over
the lease log's twin; the run records and the agents' heartbeats are the records' twin; what the tracker has read of the
agents' reports is the streams' twin; and a run called lost is written by the tracker's own Records (the record
moves on to its next attempt, re-dispatched on the publisher's twin) and comes back to the reconciler by its runs
watch, as in the service."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import msgspec
import pytest
from twin_support import twin_context

from jetcron.bus.memory import MemoryLeaseLog, MemoryPublisher, MemoryStreams
from jetcron.bus.ports import LeaseEntry
from jetcron.config import Settings
from jetcron.core.clock import ManualClock
from jetcron.core.lifecycle.reconcile import Beat
from jetcron.core.models import AgentInfo, AttemptRecord, JobSpec, Run, RunState
from jetcron.wire import subjects as s
from jetcron.wire.codec import decode
from jetcron.wire.messages import PlaceRun
from jetcron_services.run_tracker.progress import Progress
from jetcron_services.run_tracker.reconciler import REDRIVES_PER_SWEEP, Reconciler
from jetcron_services.run_tracker.records import Records
from jetcron_services.runtime import Context

DUE = datetime(2027, 1, 1, tzinfo=UTC)
ASSIGNED_AT = DUE - timedelta(seconds=500)  # a herd staged ahead: assigned 500 s before its instant
# Its first lease (jetcron.core.lifecycle.leases.first_grant): the wait, the TTL, its place in the agent's queue.
GRANTED = 620.0
HERD = 1000
"""More runs than a sweep checks at once (reconciler.SWEEP_CONCURRENCY). Not thousands: the lease log's twin finds
a key's writes by matching every stored subject, so each read costs the whole herd."""


def at(seconds: float) -> datetime:
    return DUE + timedelta(seconds=seconds)


class Log(MemoryLeaseLog):
    """The lease log's twin, each write stamped with the test's clock (as the server stamps it with its own: the
    machine's knows nothing of the instants these runs are due at), and its reads counted."""

    def __init__(self, clock: ManualClock) -> None:
        super().__init__(clock=clock.now)
        self.reads = 0

    async def last(self, key: str) -> LeaseEntry | None:
        self.reads += 1
        return await super().last(key)


def _streams(ctx: Context) -> None:
    """The events stream, every report on it read and acked by the tracker's consumer, and agent-1's assignments,
    none queued: nothing the tracker could still learn from them."""
    streams = cast(MemoryStreams, ctx.streams)
    streams.add(s.STREAM_EVENTS, [s.EVENTS_ALL])
    streams.add_consumer(s.STREAM_EVENTS, s.CONSUMER_TRACKER)
    streams.store(s.event_subject("finished", "agent-1"), b"{}")  # an earlier run's report
    for seq in streams.deliver(s.STREAM_EVENTS, s.CONSUMER_TRACKER, 10):
        streams.ack(s.STREAM_EVENTS, s.CONSUMER_TRACKER, seq)
    streams.add(s.STREAM_ASSIGN, [s.ASSIGN_ALL])
    streams.add_consumer(s.STREAM_ASSIGN, s.assign_consumer("agent-1"), s.assign_subject("agent-1"))


class Tracker:
    """A reconciler on twins, as the tracker's main wires it (its Records, the runs watch), and the test's clock."""

    def __init__(self) -> None:
        self.clock = ManualClock(ASSIGNED_AT)
        self.log = Log(self.clock)
        self.ctx: Context = twin_context("run_tracker", clock=self.clock, lease_log=self.log,
                                         settings=Settings(run_lease_ttl=10.0, assign_stall=30.0, heartbeat=2.0))
        _streams(self.ctx)
        self.records = Records(self.ctx, random.Random(0))
        self.reconciler = Reconciler(self.ctx, self.records)
        self.records.known = self.reconciler.known
        self.monotonic = 0.0
        """The tracker's own clock, by which it judges how long an agent's heartbeat has stood still."""
        self.reconciler.progress = Progress(self.ctx, clock=lambda: self.monotonic)
        self.pending = 0
        """What agent-1's heartbeats say of its reports still queued."""
        self.watching: asyncio.Task[None] | None = None

    async def assign(self, run_id: str, *, agent: str = "agent-1") -> Run:
        """The run's attempt 1 assigned to `agent`, stored."""
        run = Run(run_id=run_id, job=run_id.split(".")[0], state=RunState.ASSIGNED, attempt=1,
                  scheduled_at=DUE, due_at=DUE, created_at=ASSIGNED_AT, assigned_at=ASSIGNED_AT, agent=agent,
                  agents=[agent], spec=JobSpec(name="j", command=["true"]))
        await self.ctx.runs.put(run_id, run)
        return run

    async def beat(self, pending: int | None = None) -> None:
        """agent-1's heartbeat (a new revision of its record): `pending` reports still queued, or as it last said."""
        self.pending = self.pending if pending is None else pending
        await self.ctx.agents.put("agent-1", AgentInfo(agent_id="agent-1", cpu=1, memory_mb=1, heartbeat_at=DUE,
                                                       started_at=DUE, pending_reports=self.pending))

    async def sweep(self, seconds: float) -> None:
        """A sweep at `seconds` past the due time; then what it wrote comes back by the runs watch."""
        self.clock.set(at(seconds))
        await self.reconciler.sweep(at(seconds))
        for _ in range(5):
            await asyncio.sleep(0)

    async def lost(self) -> list[str]:
        """The runs called lost: their record closed attempt 1 and moved on to attempt 2 (called lost twice, one
        would be further on)."""
        runs = [(await self.ctx.runs.get(key))[0] for key in await self.ctx.runs.keys()]
        assert all(run.attempt <= 2 for run in runs)
        return sorted(run.run_id for run in runs if run.attempt == 2)


@pytest.fixture
async def tracker() -> AsyncIterator[Tracker]:
    tracker = Tracker()
    yield tracker
    if tracker.watching is not None:
        tracker.watching.cancel()
        await asyncio.gather(tracker.watching, return_exceptions=True)


async def a_herd(tracker: Tracker, *, lapsed: bool) -> None:
    """HERD runs assigned to agent-1 ahead of their due time, each with its first lease written at assignment
    for GRANTED seconds; `lapsed`: those leases have gone since (a herd's finished attempts no longer renew).
    The reconciler knows them from its runs watch; from here on every lease read is the reconciler's."""
    for i in range(HERD):
        await tracker.assign(f"j{i}.x")
        await tracker.ctx.leases.take(s.run_lease_key(f"j{i}.x"), "agent-1", GRANTED, attempt=1)
        if lapsed:
            tracker.log.expire(s.run_lease_key(f"j{i}.x"))
    tracker.watching = asyncio.create_task(tracker.reconciler.watch())
    await asyncio.wait_for(tracker.reconciler.synced.wait(), 5)
    assert len(tracker.reconciler.tracked) == HERD
    tracker.log.reads = 0


async def test_a_staged_herd_is_not_looked_at_before_its_stall(tracker: Tracker) -> None:
    await a_herd(tracker, lapsed=False)
    await tracker.sweep(29)
    assert (tracker.log.reads, len(tracker.reconciler.looked_at)) == (0, 0)


async def test_a_live_lease_is_read_once_per_grant_and_its_run_leaves_the_sweeps_until_then(tracker: Tracker) -> None:
    await a_herd(tracker, lapsed=False)
    # Given the herd past its stall (due + 30 s): each lease is read once, and found live
    await tracker.sweep(31)
    assert tracker.log.reads == HERD
    # Then no run is walked again while its lease cannot have lapsed (written 500 s before the due time for 620 s):
    # judged by the run lease TTL alone (10 s) it had lapsed long ago, and every run was read every second
    for second in (31.25, 33, 60, 119.5):
        await tracker.sweep(second)
    assert (tracker.log.reads, len(tracker.reconciler.looked_at)) == (HERD, 0)
    # When the grant could have run out, each is read again
    await tracker.sweep(120.5)
    assert tracker.log.reads == 2 * HERD
    assert await tracker.lost() == []  # live leases: nothing was called lost meanwhile


async def sweeps(tracker: Tracker, start: float, seconds: float, beating: bool = True) -> None:
    """Sweep every 0.25 s for `seconds` from `start`; agent-1 heartbeats every 2 s if `beating`, saying its reports
    are still queued as it last said."""
    for step in range(int(seconds / 0.25)):
        at_s = start + step * 0.25
        tracker.monotonic = at_s
        if beating and step % 8 == 0:
            await tracker.beat()
        await tracker.sweep(at_s)


async def a_herd_past_its_leases(tracker: Tracker, pending: int) -> None:
    await tracker.beat(pending)
    await a_herd(tracker, lapsed=True)


async def test_runs_whose_agent_still_has_reports_queued_wait_for_them_and_cost_nothing_meanwhile(
        tracker: Tracker) -> None:
    # Given a herd past its stall whose leases have lapsed while their reports wait on their live agent
    await a_herd_past_its_leases(tracker, pending=40_000)
    # When the tracker sweeps for a minute while the agent keeps saying reports are left
    await sweeps(tracker, 31, 60)
    # Then no run is called lost, each lease was read twice (the look and its confirmation), and then the runs
    # wait out of the sweeps for their agent
    assert (await tracker.lost(), tracker.log.reads) == ([], 2 * HERD)
    assert (len(tracker.reconciler.looked_at), len(tracker.reconciler.awaiting["agent-1"])) == (0, HERD)
    # When a heartbeat says every report has gone (and none of these came: they really were lost)
    await tracker.beat(0)
    await sweeps(tracker, 91.25, 2, beating=False)
    # Then each is judged, after an events horizon read behind that heartbeat, and called lost once: re-dispatched
    assert await tracker.lost() == sorted(f"j{i}.x" for i in range(HERD))
    again = [(await tracker.ctx.runs.get(f"j{i}.x"))[0] for i in range(HERD)]
    assert {(run.state, run.attempt) for run in again} == {(RunState.SCHEDULED, 2)}
    # handed to placement by those records alone: no PlaceRun
    assert cast(MemoryPublisher, tracker.ctx.publisher).on(s.PLACE_ALL) == []


async def test_an_agent_whose_heartbeat_stands_still_no_longer_holds_its_runs_back(tracker: Tracker) -> None:
    # Given runs waiting on an agent that said it had reports queued, then stopped heartbeating (killed)
    await a_herd_past_its_leases(tracker, pending=40_000)
    await sweeps(tracker, 31, 2)
    assert await tracker.lost() == []
    # Then, its record unchanged for three heartbeats (6 s, by the tracker's clock), the runs are judged lost
    await sweeps(tracker, 33, 8, beating=False)
    assert len(await tracker.lost()) == HERD


async def test_a_heartbeat_the_agents_watch_saw_long_ago_counts_from_then(tracker: Tracker) -> None:
    # Given runs whose agent said it had reports queued, in a heartbeat the agents watch delivered at 0 s by the
    # tracker's clock, and nothing since (killed)
    await a_herd_past_its_leases(tracker, pending=40_000)
    revision = (await tracker.ctx.agents.get("agent-1"))[1]
    tracker.reconciler.progress.watched = {"agent-1": Beat(revision, 0.0)}
    # When the first sweep that finds their leases gone comes 31 s later
    await sweeps(tracker, 31, 1.5, beating=False)
    # Then the record has stood still for 31 s, past three heartbeats: the runs are lost at once, not 6 s on
    assert len(await tracker.lost()) == HERD


async def test_runs_on_an_agent_with_no_reports_queued_are_lost_as_before(tracker: Tracker) -> None:
    await a_herd_past_its_leases(tracker, pending=0)
    await sweeps(tracker, 31, 1.5)
    assert (len(await tracker.lost()), tracker.reconciler.awaiting) == (HERD, {})


async def _sweep_with_a_stale_copy(stored_attempt: int, stored_agent: str) -> Any:
    """Our copy of the run says attempt 1 on agent-2; agent-1 has claimed the lease for attempt 2; the stored
    record is as given. What is stored of the lease once the reconciler has swept."""
    tracker = Tracker()
    tracker.clock.set(at(0))
    key = s.run_lease_key("j.x")
    assert await tracker.ctx.leases.take(key, "agent-1", 10.0, attempt=2) is not None
    copy = await tracker.assign("j.x", agent="agent-2")
    copy = msgspec.structs.replace(copy, state=RunState.RUNNING, created_at=DUE, assigned_at=DUE)
    await tracker.ctx.runs.put("j.x", msgspec.structs.replace(copy, attempt=stored_attempt, agent=stored_agent,
                                                               agents=[stored_agent]))
    tracker.reconciler.on_record(copy.run_id, copy, 1)
    await tracker.sweep(1)
    return await tracker.ctx.leases.read(key)


async def test_a_claim_ahead_of_our_copy_of_the_run_is_judged_on_the_stored_record() -> None:
    # The run moved on to attempt 2 on agent-1 (our copy lags): agent-1's claim is honest, left alone
    honest = await _sweep_with_a_stale_copy(2, "agent-1")
    assert (honest.writer, honest.value.holder, honest.value.attempt, honest.value.revoked) == (
        "agent-1", "agent-1", 2, "")
    # The stored record agrees with our copy: a claim on a later attempt by another agent is taken away
    foreign = await _sweep_with_a_stale_copy(1, "agent-2")
    assert (foreign.value.holder, foreign.value.revoked) == ("", "claimed by agent-1, not placed there")


async def test_a_herd_waiting_for_room_is_re_driven_a_bounded_number_per_sweep_and_leaves_the_sweeps(
        tracker: Tracker) -> None:
    # Given HERD runs left `scheduled` past their re-drive age (placement holds them: no agent has room)
    for i in range(HERD):
        await tracker.ctx.runs.put(f"j{i}.x", Run(run_id=f"j{i}.x", job=f"j{i}", state=RunState.SCHEDULED, attempt=1,
                                                  scheduled_at=DUE, due_at=DUE, created_at=DUE,
                                                  spec=JobSpec(name="j", command=["true"])))
    tracker.watching = asyncio.create_task(tracker.reconciler.watch())
    await asyncio.wait_for(tracker.reconciler.synced.wait(), 5)
    publisher = cast(MemoryPublisher, tracker.ctx.publisher)

    def redriven() -> list[str]:
        return [decode(p.data, PlaceRun).run_id for p in publisher.on(s.PLACE_ALL)]

    # When the sweeps pass the re-drive age: one sweep re-drives at most REDRIVES_PER_SWEEP of them, and none of
    # the herd is walked again by the sweeps of the next re-drive period (the first ones wait out their gap, the
    # rest the period)
    await tracker.sweep(30.5)
    first = redriven()
    assert len(first) == len(set(first)) == REDRIVES_PER_SWEEP
    for second in (30.75, 45, 60.25):
        await tracker.sweep(second)
        assert (redriven(), len(tracker.reconciler.looked_at)) == (first, 0)
    # Then the next period's first sweep re-drives as many others
    await tracker.sweep(60.5)
    second = redriven()[len(first):]
    assert len(second) == REDRIVES_PER_SWEEP and not set(second) & set(first)
    assert {(await tracker.ctx.runs.get(run_id))[0].state for run_id in first + second} == {RunState.SCHEDULED}


async def test_a_run_over_the_re_drive_budget_that_ended_meanwhile_is_not_put_back_in_the_sweeps(
        tracker: Tracker) -> None:
    # Given a sweep whose re-drive budget is spent, and a run that ended while the sweep waited (no longer tracked)
    tracker.reconciler._redrives_left = 0
    ended = Run(run_id="gone.x", job="gone", state=RunState.SCHEDULED, attempt=1, scheduled_at=DUE, due_at=DUE,
                created_at=DUE, spec=JobSpec(name="j", command=["true"]))
    assert "gone.x" not in tracker.reconciler.tracked
    # When the sweep judges what it found of it (a re-drive, over the budget)
    await tracker.reconciler._check(ended, at(31))
    # Then it is neither re-driven nor left in the quiet index, which a later sweep would look up as tracked
    assert cast(MemoryPublisher, tracker.ctx.publisher).on(s.PLACE_ALL) == []
    assert tracker.reconciler.quiet.pop_due(0, at(3600), limit=10) == []
    await tracker.sweep(3600)  # and a sweep after its would-be time does not trip over it


async def test_a_retry_of_a_run_kept_in_the_index_form_is_written_from_its_whole_record(tracker: Tracker) -> None:
    # Given a run waiting for its retry: the index keeps it without its spec and history
    spec = JobSpec(name="j", command=["true"], queue="etl")
    failed = AttemptRecord(attempt=1, agent="agent-1", outcome="failed", exit_code=1)
    await tracker.ctx.runs.put("j.r", Run(run_id="j.r", job="j", state=RunState.RETRY_WAIT, attempt=1,
                                          scheduled_at=DUE, due_at=at(5), created_at=DUE, spec=spec,
                                          history=[failed]))
    tracker.watching = asyncio.create_task(tracker.reconciler.watch())
    await asyncio.wait_for(tracker.reconciler.synced.wait(), 5)
    kept = tracker.reconciler.tracked["j.r"]
    assert (kept.run.spec, kept.run.history, kept.queue) == (None, [], "etl")
    assert tracker.reconciler.known("j.r") is None
    # When its retry comes due
    await tracker.sweep(6)
    # Then the next attempt is written from the stored record (its spec and history kept), not from the index's
    stored = (await tracker.ctx.runs.get("j.r"))[0]
    assert (stored.state, stored.attempt, stored.spec, stored.history) == (RunState.SCHEDULED, 2, spec, [failed])
    # And once it is assigned the index keeps it whole, so its agent's reports are written with no read
    assigned = msgspec.structs.replace(stored, state=RunState.ASSIGNED, agent="agent-1", agents=["agent-1"],
                                       assigned_at=at(7))
    await tracker.ctx.runs.put("j.r", assigned)
    for _ in range(5):
        await asyncio.sleep(0)
    known = tracker.reconciler.known("j.r")
    assert known is not None and known[0].spec == spec

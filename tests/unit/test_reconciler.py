"""The reconciler's sweep looks at a run only when something could have happened to it: a live lease is read
once per grant (its own TTL, which for a staged run covers the wait), not every sweep."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import cast

import msgspec

from jetcron.bus.lease import Lease, LeaseValue
from jetcron.config import Settings
from jetcron.core.models import AgentInfo, JobSpec, Run, RunState
from jetcron.services.run_tracker.progress import Progress
from jetcron.services.run_tracker.reconciler import Reconciler
from jetcron.services.run_tracker.records import Records
from jetcron.services.runtime import Context

DUE = datetime(2027, 1, 1, tzinfo=UTC)
ASSIGNED_AT = DUE - timedelta(seconds=500)  # a herd staged ahead: assigned 500 s before its instant
GRANTED = 620.0  # its first lease: the wait, the TTL, its place in the agent's queue (core/leases.first_grant)
HERD = 1_000


class _Leases:
    """Every run's lease is live, written at assignment for GRANTED seconds; reads are counted."""

    def __init__(self) -> None:
        self.reads = 0

    async def read(self, key: str) -> Lease:
        self.reads += 1
        return Lease(key=key, token=7, value=LeaseValue(holder="agent-1", attempt=1), written_at=ASSIGNED_AT,
                     ttl=GRANTED)


class _Progress:
    """The agent has nothing queued (its assignments were all taken before the instant), reports are read."""

    read_up_to = 10**6

    async def refresh(self) -> None:
        pass

    async def agent_idle_or_gone(self, agent: str) -> bool:
        return True

    async def horizon(self) -> int:
        return 0


def at(seconds: float) -> datetime:
    return DUE + timedelta(seconds=seconds)


def staged_herd() -> tuple[Reconciler, _Leases]:
    leases = _Leases()
    ctx = cast(Context, SimpleNamespace(settings=Settings(run_lease_ttl=10.0, assign_stall=30.0), leases=leases))
    reconciler = Reconciler(ctx, cast(Records, None))
    reconciler.progress = _Progress()  # type: ignore[assignment]
    spec = JobSpec(name="j", command=["true"])
    for i in range(HERD):
        run = Run(run_id=f"j{i}.x", job=f"j{i}", state=RunState.ASSIGNED, attempt=1, scheduled_at=DUE, due_at=DUE,
                  created_at=ASSIGNED_AT, assigned_at=ASSIGNED_AT, agent="agent-1", agents=["agent-1"], spec=spec)
        reconciler.on_record(run.run_id, run, i + 1)
    return reconciler, leases


async def test_a_staged_herd_is_not_looked_at_before_its_stall() -> None:
    reconciler, leases = staged_herd()
    await reconciler.sweep(at(29))
    assert (leases.reads, len(reconciler.looked_at)) == (0, 0)


async def test_a_live_lease_is_read_once_per_grant_and_its_run_leaves_the_sweeps_until_then() -> None:
    reconciler, leases = staged_herd()
    # Given the herd past its stall (due + 30 s): each lease is read once, and found live
    await reconciler.sweep(at(31))
    assert leases.reads == HERD
    # Then no run is walked again while its lease cannot have lapsed (written 500 s before the due time for 620 s):
    # judged by the run lease TTL alone (10 s) it had lapsed long ago, and every run was read every second
    for second in (31.25, 33, 60, 119.5):
        await reconciler.sweep(at(second))
    assert (leases.reads, len(reconciler.looked_at)) == (HERD, 0)
    # When the grant could have run out, each is read again
    await reconciler.sweep(at(120.5))
    assert leases.reads == 2 * HERD


class _Gone:
    """Every run's lease has lapsed (a herd's finished attempts no longer renew); reads are counted."""

    def __init__(self) -> None:
        self.reads = 0

    async def read(self, key: str) -> None:
        self.reads += 1


class _Agent:
    """agent-1's heartbeat record: `pending` reports queued, a new revision each time `beat()` is called."""

    def __init__(self, pending: int) -> None:
        self.pending, self.revision = pending, 1

    def beat(self, pending: int | None = None) -> None:
        self.revision += 1
        self.pending = self.pending if pending is None else pending

    async def maybe(self, agent: str) -> tuple[AgentInfo, int]:
        return AgentInfo(agent_id=agent, cpu=1, memory_mb=1, heartbeat_at=DUE, started_at=DUE,
                         pending_reports=self.pending), self.revision


class _Server:
    """The events stream and its consumers: everything published has been read by the tracker, nothing queued."""

    async def consumer_info(self, stream: str, consumer: str) -> SimpleNamespace:
        return SimpleNamespace(ack_floor=SimpleNamespace(stream_seq=10**6), num_pending=0, num_ack_pending=0)

    async def stream_info(self, stream: str) -> SimpleNamespace:
        return SimpleNamespace(state=SimpleNamespace(last_seq=10**6, messages=0), config=SimpleNamespace(max_msgs=-1))


class _Lost:
    """The run changes the reconciler decides (here: only ever a loss); the record then moves on, as the watch
    would deliver it (re-dispatched: no longer this attempt)."""

    def __init__(self) -> None:
        self.runs: list[str] = []
        self.reconciler: Reconciler | None = None

    async def change(self, run_id: str, make: object) -> None:
        self.runs.append(run_id)
        assert self.reconciler is not None
        self.reconciler.on_record(run_id, None, 0)


def herd_past_its_leases(agent: _Agent) -> tuple[Reconciler, _Gone, _Lost, list[float]]:
    leases, lost, clock = _Gone(), _Lost(), [0.0]
    ctx = cast(Context, SimpleNamespace(settings=Settings(run_lease_ttl=10.0, assign_stall=30.0, heartbeat=2.0),
                                        leases=leases, agents=agent, js=_Server(),
                                        log=SimpleNamespace(info=lambda *a, **k: None)))
    reconciler = lost.reconciler = Reconciler(ctx, cast(Records, lost))
    reconciler.progress = Progress(ctx, clock=lambda: clock[0])
    spec = JobSpec(name="j", command=["true"])
    for i in range(HERD):
        run = Run(run_id=f"j{i}.x", job=f"j{i}", state=RunState.ASSIGNED, attempt=1, scheduled_at=DUE, due_at=DUE,
                  created_at=ASSIGNED_AT, assigned_at=ASSIGNED_AT, agent="agent-1", agents=["agent-1"], spec=spec)
        reconciler.on_record(run.run_id, run, i + 1)
    return reconciler, leases, lost, clock


async def sweeps(reconciler: Reconciler, clock: list[float], start: float, seconds: float, agent: _Agent,
                 beating: bool = True) -> None:
    """Sweep every 0.25 s for `seconds` from `start`; the agent heartbeats every 2 s if `beating`."""
    for step in range(int(seconds / 0.25)):
        at_s = start + step * 0.25
        clock[0] = at_s
        if beating and step % 8 == 0:
            agent.beat()
        await reconciler.sweep(at(at_s))


async def test_runs_whose_agent_still_has_reports_queued_wait_for_them_and_cost_nothing_meanwhile() -> None:
    # Given a herd past its stall whose leases have lapsed while their reports wait on their live agent
    agent = _Agent(pending=40_000)
    reconciler, leases, lost, clock = herd_past_its_leases(agent)
    # When the tracker sweeps for a minute while the agent keeps saying reports are left
    await sweeps(reconciler, clock, 31, 60, agent)
    # Then no run is called lost, each lease was read twice (the look and its confirmation), and then the runs
    # wait out of the sweeps for their agent
    assert (lost.runs, leases.reads) == ([], 2 * HERD)
    assert (len(reconciler.looked_at), len(reconciler.awaiting["agent-1"])) == (0, HERD)
    # When a heartbeat says every report has gone (and none of these came: they really were lost)
    agent.beat(pending=0)
    await sweeps(reconciler, clock, 91.25, 2, agent, beating=False)
    # Then each is judged, after an events horizon read behind that heartbeat, and called lost once
    assert sorted(lost.runs) == sorted(f"j{i}.x" for i in range(HERD))


async def test_an_agent_whose_heartbeat_stands_still_no_longer_holds_its_runs_back() -> None:
    # Given runs waiting on an agent that said it had reports queued, then stopped heartbeating (killed)
    agent = _Agent(pending=40_000)
    reconciler, _, lost, clock = herd_past_its_leases(agent)
    await sweeps(reconciler, clock, 31, 2, agent)
    assert lost.runs == []
    # Then, its record unchanged for three heartbeats (6 s, by the tracker's clock), the runs are judged lost
    await sweeps(reconciler, clock, 33, 8, agent, beating=False)
    assert len(lost.runs) == HERD


async def test_runs_on_an_agent_with_no_reports_queued_are_lost_as_before() -> None:
    agent = _Agent(pending=0)
    reconciler, _, lost, clock = herd_past_its_leases(agent)
    await sweeps(reconciler, clock, 31, 1.5, agent)
    assert (len(lost.runs), reconciler.awaiting) == (HERD, {})


class _Claimed:
    """A live claim on attempt 2 by agent-1; revokes are recorded."""

    def __init__(self) -> None:
        self.revoked: list[str] = []

    async def read(self, key: str) -> Lease:
        return Lease(key=key, token=9, value=LeaseValue(holder="agent-1", attempt=2), written_at=at(0), ttl=10.0,
                     writer="agent-1")

    async def revoke(self, key: str, why: str, ttl: float) -> int:
        self.revoked.append(why)
        return 1


async def _sweep_with_a_stale_copy(stored_attempt: int, stored_agent: str) -> _Claimed:
    """Our copy of the run says attempt 1 on agent-2; the claim is attempt 2 by agent-1; the stored record is
    as given."""
    from jetcron.bus.memory import MemoryRecords
    from jetcron.wire import subjects as s

    leases, runs = _Claimed(), MemoryRecords(s.BUCKET_RUNS, Run)
    ctx = cast(Context, SimpleNamespace(settings=Settings(run_lease_ttl=10.0, assign_stall=30.0), leases=leases,
                                        runs=runs, log=SimpleNamespace(warning=lambda *a, **k: None,
                                                                       info=lambda *a, **k: None)))
    reconciler = Reconciler(ctx, cast(Records, None))
    reconciler.progress = _Progress()  # type: ignore[assignment]
    copy = Run(run_id="j.x", job="j", state=RunState.RUNNING, attempt=1, scheduled_at=DUE, due_at=DUE,
               created_at=DUE, assigned_at=DUE, agent="agent-2", agents=["agent-2"], spec=JobSpec(name="j",
                                                                                                 command=["true"]))
    await runs.put("j.x", msgspec.structs.replace(copy, attempt=stored_attempt, agent=stored_agent,
                                                  agents=[stored_agent]))
    reconciler.on_record(copy.run_id, copy, 1)
    await reconciler.sweep(at(1))
    return leases


async def test_a_claim_ahead_of_our_copy_of_the_run_is_judged_on_the_stored_record() -> None:
    # The run moved on to attempt 2 on agent-1 (our copy lags): agent-1's claim is honest, left alone
    assert (await _sweep_with_a_stale_copy(2, "agent-1")).revoked == []
    # The stored record agrees with our copy: a claim on a later attempt by another agent is taken away
    assert (await _sweep_with_a_stale_copy(1, "agent-2")).revoked == ["claimed by agent-1, not placed there"]

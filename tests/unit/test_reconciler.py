"""The reconciler's sweep looks at a run only when something could have happened to it: a live lease is read
once per grant (its own TTL, which for a staged run covers the wait), not every sweep."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import cast

from jetcron.bus.lease import Lease, LeaseValue
from jetcron.config import Settings
from jetcron.core.models import JobSpec, Run, RunState
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

    async def refresh(self) -> None:
        pass

    async def agent_idle_or_gone(self, agent: str | None) -> bool:
        return True

    def reports_read(self, seq: int) -> bool:
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

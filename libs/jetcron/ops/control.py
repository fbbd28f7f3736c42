"""Cancel a run: the fenced path shared by the API and the trigger's cancel_previous overlap policy; and preempt
one (placement), fenced the same way."""

from __future__ import annotations

import contextlib
from datetime import datetime

from jetcron.bus.lease import Leases, Stop
from jetcron.bus.ports import Records, Rpc
from jetcron.core.errors import JetcronError
from jetcron.core.lifecycle.run_state import RunEvent
from jetcron.core.lifecycle.runs import Change, apply
from jetcron.core.models import Run, RunState
from jetcron.wire import subjects as s
from jetcron.wire.codec import encode
from jetcron.wire.messages import CancelRun


async def cancel_run(runs: Records[Run], leases: Leases, rpc: Rpc, run_id: str, reason: str,
                     now: datetime, lease_ttl: float) -> Run:
    """CAS the run to cancelled, then revoke its lease so the agent kills the child at its next renewal.
    A run already ended is returned as it is; Contended when it keeps changing under us."""

    def decide(run: Run) -> Run | None:
        return None if run.state.terminal else apply(run, Change(event=RunEvent.CANCEL, reason=reason), now)

    changed = await runs.change(run_id, decide, tries=10)
    if changed is None:
        return (await runs.get(run_id))[0]
    old, new, _revision = changed
    if old.state in (RunState.ASSIGNED, RunState.RUNNING):
        await leases.revoke(s.run_lease_key(run_id), reason, lease_ttl * 3)
        for agent in old.agents:
            await rpc.notify(s.control_subject(agent), encode(CancelRun(run_id=run_id, attempt=old.attempt,
                                                                      reason=reason)))
        await _notify_stops(leases, old, Stop(run_id=run_id, attempt=old.attempt, reason=reason,
                                              at=now.timestamp()), lease_ttl)
    return new


async def _notify_stops(leases: Leases, run: Run, stop: Stop, lease_ttl: float) -> None:
    """The durable path to the agents of a bound claim (liveness per agent: the claim is not renewed, so its
    revoke alone would be found only at the claim's rare renewal): a stop notice on each agent's lease, found at
    its next renewal. An agent with no lease of its own (gone, or one of the previous release renewing each run's
    own claim, which finds the revoke) gets none."""
    for agent in run.agents:
        with contextlib.suppress(JetcronError):
            await leases.notify_stops(agent, stop, lease_ttl * 3)


async def preempt_run(runs: Records[Run], leases: Leases, rpc: Rpc, run_id: str, attempt: int, reason: str,
                      now: datetime, lease_ttl: float, grace: float,
                      copy: tuple[Run, int] | None = None) -> Run | None:
    """Stop a running attempt to give its place to a run of higher priority (placement decided it,
    docs/preemption.md), fenced as a cancel is: CAS running -> scheduled as a new attempt due once `grace` has
    passed (jetcron.core.lifecycle.runs.apply, PREEMPT), tell its agents to stop it with that grace (SIGTERM, the grace,
    SIGKILL: it may save a checkpoint), revoke its lease (the durable path: a lost message still stops it at its next
    renewal); the new attempt's `scheduled` record is its hand-off to placement. None, and nothing done, when the
    attempt no longer runs."""

    def decide(run: Run) -> Run | None:
        if run.attempt != attempt or run.state is not RunState.RUNNING:
            return None
        return apply(run, Change(event=RunEvent.PREEMPT, reason=reason, delay_seconds=grace), now)

    changed = await runs.change(run_id, decide, copy=copy, tries=4)
    if changed is None:
        return None
    old, new, _revision = changed
    # The record decided: what follows may fail without undoing it. A lost message still stops the attempt at its
    # next renewal (the revoke), a lost revoke when the next attempt takes the lease over. The agents first, then
    # the lease: stopped by the message, the attempt renews nothing more (a renewal that found the lease revoked
    # first would kill it at once, without its grace).
    with contextlib.suppress(Exception):
        for agent in old.agents:
            await rpc.notify(s.control_subject(agent), encode(CancelRun(run_id=run_id, attempt=old.attempt,
                                                                      reason=reason, grace_seconds=grace)))
        await rpc.flush()
    with contextlib.suppress(JetcronError):
        await leases.revoke(s.run_lease_key(run_id), reason, lease_ttl * 3)
    await _notify_stops(leases, old, Stop(run_id=run_id, attempt=old.attempt, reason=reason, grace_seconds=grace,
                                          at=now.timestamp()), lease_ttl)
    return new

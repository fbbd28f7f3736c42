"""Cancel a run: the fenced path shared by the API and the trigger's cancel_previous overlap policy."""

from __future__ import annotations

from datetime import datetime

from nats.aio.client import Client

from jetcron.bus.kv import Store
from jetcron.bus.lease import Leases
from jetcron.core.errors import Contended, WriteConflict
from jetcron.core.models import Run, RunState
from jetcron.core.run_state import RunEvent
from jetcron.core.runs import Change, apply
from jetcron.wire import subjects as s
from jetcron.wire.codec import encode
from jetcron.wire.messages import CancelRun


async def cancel_run(runs: Store[Run], leases: Leases, nc: Client, run_id: str, reason: str, now: datetime,
                     lease_ttl: float) -> Run:
    """CAS the run to cancelled, then revoke its lease so the agent kills the child at its next renewal."""
    for _ in range(10):
        run, revision = await runs.get(run_id)
        if run.state.terminal:
            return run
        new = apply(run, Change(event=RunEvent.CANCEL, reason=reason), now)
        try:
            await runs.update(run_id, new, revision)
        except WriteConflict:
            continue
        if run.state in (RunState.ASSIGNED, RunState.RUNNING):
            await leases.revoke(s.run_lease_key(run_id), reason, lease_ttl * 3)
            for agent in run.agents:
                await nc.publish(s.control_subject(agent), encode(CancelRun(run_id=run_id, attempt=run.attempt,
                                                                            reason=reason)))
        return new
    raise Contended(f"run {run_id} is changing concurrently; retry")

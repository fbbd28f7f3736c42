"""Cancel a run: the fenced path shared by the API and the trigger's cancel_previous overlap policy."""

from __future__ import annotations

from datetime import datetime

from jetcron.bus import rpc
from jetcron.bus.lease import Leases
from jetcron.bus.ports import Connection, Records
from jetcron.core.models import Run, RunState
from jetcron.core.run_state import RunEvent
from jetcron.core.runs import Change, apply
from jetcron.wire import subjects as s
from jetcron.wire.codec import encode
from jetcron.wire.messages import CancelRun


async def cancel_run(runs: Records[Run], leases: Leases, nc: Connection, run_id: str, reason: str,
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
            await rpc.notify(nc, s.control_subject(agent), encode(CancelRun(run_id=run_id, attempt=old.attempt,
                                                                          reason=reason)))
    return new

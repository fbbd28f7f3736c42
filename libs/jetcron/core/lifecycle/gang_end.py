"""How a gang member stops once its run record shows the gang's attempt is over, pure.

A member on another host learns that its gang is stopped from three places: the control message, the stop
notice its agent's lease renewal finds, and its own watch of the run record (services/jetcron_services/agent/gang.py). A
cancel or a preemption writes the record first, so the watch can see it before the message comes; it must then stop
the child as the message would have, with the same grace period, or a preempted gang's member is killed
without the grace in which it may save its checkpoint. Any other end (another member failed, the run was lost
or retried) leaves the child nothing to finish: it is killed at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from jetcron.core.lifecycle.run_state import ACTIVE
from jetcron.core.models import Run


@dataclass(frozen=True)
class MemberStop:
    why: str
    grace: bool
    """Stopped as a timeout stops a child (SIGTERM, the grace period, SIGKILL); False: killed at once."""
    grace_seconds: float | None = None
    """The grace period; None: the agent's kill grace (a cancel's, as its control message gives)."""


def member_stop(run: Run, attempt: int, now: datetime) -> MemberStop | None:
    """How the member of `attempt` stops, given the run's record; None while the record still holds the attempt."""
    if run.attempt == attempt and run.state in ACTIVE:
        return None
    why = f"gang attempt {attempt} is over (run {run.state}, attempt {run.attempt})"
    ended = next((h.outcome for h in reversed(run.history) if h.attempt == attempt), "")
    if ended == "preempted" and run.attempt == attempt + 1:
        # The next attempt is due once this one has had its grace (jetcron.core.lifecycle.runs, PREEMPT): what is left
        # of it.
        return MemberStop(why, True, max(0.0, (run.due_at - now).total_seconds()))
    if ended in ("preempted", "cancelled"):
        return MemberStop(why, True)
    return MemberStop(why, False)

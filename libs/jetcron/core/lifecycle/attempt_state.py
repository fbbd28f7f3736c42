"""An attempt's lifecycle on its agent as data: phases, events, a transition table and one pure advance()."""

from __future__ import annotations

import enum

from jetcron.core.errors import IllegalTransition


class AttemptPhase(enum.StrEnum):
    STAGED = "staged"
    """Its lease is taken and it holds a slot; not launched yet (a staged attempt waits for its due time in the
    agent's index, with no task)."""
    STARTING = "starting"
    """Launched: it waits for its due time, resolves its secrets and spawns its child."""
    RUNNING = "running"
    """Its child runs (in sim, would run); the lease is renewed."""
    REPORTING = "reporting"
    """The child has ended, or could not start: its finish report is next or in flight. The lease fences
    nothing any more and is no longer renewed (a gang's still is: the tracker judges a gang by its leases)."""
    HOLDING = "holding"
    """A gang member whose child exited 0: it reports nothing and holds its member lease while the gang runs."""
    SUCCEEDED = "succeeded"
    """Its success is reported: no attempt follows, so the lease is left to expire (one write saved)."""
    HANDED_BACK = "handed_back"
    """The agent drains: the child is stopped and not reported; the run is given back once the lease is
    released (a gang member gives the whole gang back at once)."""
    FENCED = "fenced"
    """The lease is gone or no longer this attempt's (lapsed, taken, revoked by a cancel, superseded by a newer
    attempt, the gang's attempt over): the child is killed (a cancel: stopped), nothing more is reported and
    the lease is not released."""
    ENDED = "ended"
    """Over: its slot is free again."""


class AttemptEvent(enum.StrEnum):
    LAUNCH = "launch"
    """Its task starts: the due time has come (or is near)."""
    SPAWN = "spawn"
    """The child started."""
    EXIT = "exit"
    """The child ended (or could not start) while the attempt was still on: report it."""
    SUCCEED = "succeed"
    """The finish report said succeeded and was acked."""
    HOLD = "hold"
    """A gang member's child exited 0: hold the member lease until the gang's attempt is over."""
    HAND_BACK = "hand_back"
    """The agent drains: give the run back unfinished."""
    FENCE = "fence"
    """The lease is lost, taken or revoked, or the attempt is superseded or cancelled: stop for good."""
    END = "end"
    """run() is over, whatever way: the lease was released or left, the hand-back sent."""


P, E = AttemptPhase, AttemptEvent

TRANSITIONS: dict[tuple[AttemptPhase, AttemptEvent], AttemptPhase] = {
    (P.STAGED, E.LAUNCH): P.STARTING,
    (P.STAGED, E.HAND_BACK): P.HANDED_BACK,
    (P.STAGED, E.FENCE): P.FENCED,
    (P.STARTING, E.SPAWN): P.RUNNING,
    (P.STARTING, E.EXIT): P.REPORTING,  # could not start (not found, secrets missing, root refused)
    (P.STARTING, E.HAND_BACK): P.HANDED_BACK,
    (P.STARTING, E.FENCE): P.FENCED,
    (P.STARTING, E.END): P.ENDED,  # crashed or cancelled before its child started
    (P.RUNNING, E.EXIT): P.REPORTING,
    (P.RUNNING, E.HAND_BACK): P.HANDED_BACK,
    (P.RUNNING, E.FENCE): P.FENCED,
    (P.RUNNING, E.END): P.ENDED,
    (P.REPORTING, E.SUCCEED): P.SUCCEEDED,
    (P.REPORTING, E.HOLD): P.HOLDING,
    (P.REPORTING, E.FENCE): P.FENCED,  # its report goes on; the lease is then left alone
    (P.REPORTING, E.END): P.ENDED,
    (P.HOLDING, E.HAND_BACK): P.HANDED_BACK,  # a draining member gives its gang back
    (P.HOLDING, E.FENCE): P.FENCED,
    (P.HOLDING, E.END): P.ENDED,
    (P.SUCCEEDED, E.FENCE): P.FENCED,
    (P.SUCCEEDED, E.END): P.ENDED,
    (P.HANDED_BACK, E.FENCE): P.FENCED,  # the lease lapsed while the child was stopping: no hand-back then
    (P.HANDED_BACK, E.END): P.ENDED,
    (P.FENCED, E.END): P.ENDED,
}
"""(phase, event) -> the next phase. What is not here is refused: a hand-back once the child has ended and
reported (the report says how it ended), anything once fenced but the end, anything once ended."""

REPORTS = frozenset({P.REPORTING, P.HOLDING, P.SUCCEEDED})
"""The child has ended and the attempt reports, or has reported, how."""


class IllegalAttemptMove(IllegalTransition):
    """The attempt lifecycle refused an event in the attempt's current phase."""

    def __init__(self, run_id: str, attempt: int, phase: AttemptPhase, event: AttemptEvent) -> None:
        self.attempt = attempt
        self.phase = phase
        self.event = event
        super().__init__(run_id, str(phase), "?", f"attempt {attempt} cannot {event} once {phase}")


def allows(phase: AttemptPhase, event: AttemptEvent) -> bool:
    return (phase, event) in TRANSITIONS


def advance(phase: AttemptPhase, event: AttemptEvent, *, run_id: str, attempt: int) -> AttemptPhase:
    """The phase after `event`, or IllegalAttemptMove naming the run, the attempt, the phase and the event."""
    try:
        return TRANSITIONS[phase, event]
    except KeyError:
        raise IllegalAttemptMove(run_id, attempt, phase, event) from None

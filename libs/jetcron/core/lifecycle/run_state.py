"""The run state machine as data: states, events, a transition table and one pure apply()."""

from __future__ import annotations

import enum


class RunState(enum.StrEnum):
    WAITING = "waiting"
    """Recorded but held: overlap buffer or upstream jobs; not yet handed to placement."""
    SCHEDULED = "scheduled"
    """Due (or soon due) and handed to placement; `reason` says why it is not placed yet."""
    ASSIGNED = "assigned"
    """Placement chose an agent; the agent has not started it yet."""
    RUNNING = "running"
    """An agent holds the run lease and the process runs."""
    RETRY_WAIT = "retry_wait"
    """An attempt failed; the next attempt starts at `due_at`."""
    SUCCEEDED = "succeeded"
    """The attempt exited 0."""
    FAILED = "failed"
    """An attempt failed in a way that must not be retried (a non-retryable exit code)."""
    DEAD = "dead"
    """Every attempt failed or was lost; the run went to the dead-letter stream."""
    CANCELLED = "cancelled"
    """Cancelled by a user or by the overlap policy."""
    SKIPPED = "skipped"
    """The occurrence was not run: misfire, overlap, paused or DST policy (see `reason`)."""
    BLOCKED = "blocked"
    """An upstream job of the same flow failed for good."""

    @property
    def terminal(self) -> bool:
        return self in TERMINAL


TERMINAL = frozenset(
    {RunState.SUCCEEDED, RunState.FAILED, RunState.DEAD, RunState.CANCELLED, RunState.SKIPPED, RunState.BLOCKED}
)
ACTIVE = frozenset({RunState.ASSIGNED, RunState.RUNNING})


class RunEvent(enum.StrEnum):
    RELEASE = "release"
    """A waiting run may go to placement."""
    WAIT = "wait"
    """Placement cannot place it now; only the reason changes."""
    ASSIGN = "assign"
    """Placement chose an agent."""
    START = "start"
    """The agent took the lease and started the process."""
    SUCCEED = "succeed"
    FAIL = "fail"
    """The process exited non-zero, timed out, or could not start."""
    LOSE = "lose"
    """The lease expired or the assignment stalled: the agent is gone."""
    HAND_BACK = "hand_back"
    """A draining agent gave the run back unfinished."""
    PREEMPT = "preempt"
    """Placement stopped the running attempt to give its place to a run of strictly higher priority: the run is
    queued again at its own priority as a new attempt, spending nothing of its retry budget (docs/preemption.md)."""
    RETRY = "retry"
    """The backoff delay passed."""
    CANCEL = "cancel"
    SKIP = "skip"
    BLOCK = "block"


LOST_OUTCOME = "lost"
"""The outcome an attempt is closed with when its lease lapsed while it ran (RunEvent.LOSE from running)."""

S, E = RunState, RunEvent

# (from, event) -> the states the event may lead to; apply() picks one from the event's data.
TRANSITIONS: dict[tuple[RunState, RunEvent], frozenset[RunState]] = {
    (S.WAITING, E.RELEASE): frozenset({S.SCHEDULED}),
    (S.WAITING, E.SKIP): frozenset({S.SKIPPED}),
    (S.WAITING, E.CANCEL): frozenset({S.CANCELLED}),
    (S.WAITING, E.BLOCK): frozenset({S.BLOCKED}),
    (S.SCHEDULED, E.WAIT): frozenset({S.SCHEDULED}),
    (S.SCHEDULED, E.ASSIGN): frozenset({S.ASSIGNED}),
    (S.SCHEDULED, E.CANCEL): frozenset({S.CANCELLED}),
    (S.SCHEDULED, E.BLOCK): frozenset({S.BLOCKED}),
    (S.ASSIGNED, E.START): frozenset({S.RUNNING}),
    (S.ASSIGNED, E.LOSE): frozenset({S.SCHEDULED, S.DEAD}),
    (S.ASSIGNED, E.HAND_BACK): frozenset({S.SCHEDULED}),
    (S.ASSIGNED, E.FAIL): frozenset({S.RETRY_WAIT, S.SCHEDULED, S.FAILED, S.DEAD}),
    (S.ASSIGNED, E.CANCEL): frozenset({S.CANCELLED}),
    (S.RUNNING, E.SUCCEED): frozenset({S.SUCCEEDED}),
    (S.RUNNING, E.FAIL): frozenset({S.RETRY_WAIT, S.SCHEDULED, S.FAILED, S.DEAD}),
    (S.RUNNING, E.LOSE): frozenset({S.SCHEDULED, S.RETRY_WAIT, S.DEAD}),
    (S.RUNNING, E.HAND_BACK): frozenset({S.SCHEDULED}),
    (S.RUNNING, E.PREEMPT): frozenset({S.SCHEDULED}),
    (S.RUNNING, E.CANCEL): frozenset({S.CANCELLED}),
    (S.RETRY_WAIT, E.RETRY): frozenset({S.SCHEDULED}),
    (S.RETRY_WAIT, E.CANCEL): frozenset({S.CANCELLED}),
}

# Events that come from an attempt's agent: they must carry the current attempt (and, once
# running, the current fencing token) or they are stale.
FENCED_EVENTS = frozenset({E.START, E.SUCCEED, E.FAIL, E.HAND_BACK})

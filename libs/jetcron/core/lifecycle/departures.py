"""Agents that left, pure: which ones the run tracker's leader counts as lost (jetcron_agents_lost_total).

An agent that dies cannot count its own death: its heartbeat failures counter dies with it. The tracker watches
the agents bucket and notes when each agent's record last moved (a `Beat`, by the tracker's monotonic clock, not
the agent's). An agent that stops cleanly deletes its entry, and the watch says so: it left, nothing is counted.
One whose record stands still for as long as the bucket keeps an entry (JETCRON_AGENT_ENTRY_SECONDS) has had its
entry aged out by the server: it is looked up once to be sure (a stalled watch must not make every agent look
dead), and counted lost if the entry is gone. Counted once per disappearance: if it heartbeats again it is
watched again, and a second death counts again.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping

from jetcron.core.lifecycle.reconcile import Beat
from jetcron.core.lifecycle.run_state import LOST_OUTCOME, RunState
from jetcron.core.models import Run


class Found(enum.Enum):
    LOST = "lost"
    """The entry is gone: the server aged it out (no clean exit was seen)."""
    ALIVE = "alive"
    """The record moved on since we last saw it (the watch is behind, or the agent came back)."""
    WAIT = "wait"
    """The same record is still there: the server has not aged it out yet; look again later."""


def standing_still(beats: Mapping[str, Beat], now: float, entry_age: float) -> list[str]:
    """Agents whose record has not moved for longer than the bucket keeps an entry: the ones to look up now."""
    return sorted(agent for agent, beat in beats.items() if now - beat.seen_at > entry_age)


def judge(beat: Beat, found: int | None) -> Found:
    """What a look-up of an agent standing still says: `found` is the revision of its entry now, None when it has
    none. Our clock for the beat started when we first saw that revision, after it was written, so by the time
    we look the server has usually aged it out; when not (a race of milliseconds), it is looked up again."""
    if found is None:
        return Found.LOST
    return Found.WAIT if found == beat.revision else Found.ALIVE


def lapsed_with(before: Run | None, after: Run | None) -> str | None:
    """The agent whose lease lapsed, as a record's change shows it: `before` ran on that one agent (not a gang,
    whose loss may be another member's) and `after` closed that attempt as lost there (whatever came next: a new
    attempt, a retry wait, the dead letters).

    Under liveness per agent a run's claim lives by its agent's lease, so a running attempt is called lost when
    that lease is gone (or, rarely, when a live agent's every report of it was lost): placement, which otherwise
    forgets an agent four missed heartbeats after its last, takes the agent off its books until its next
    heartbeat rather than place the re-dispatched runs back on a dead host. Only a change seen as it happens
    counts: a record first read already past it (a replica catching up) says nothing of the agent now. None when
    the change says no such thing."""
    if before is None or after is None or before.state is not RunState.RUNNING or before.agent is None:
        return None
    if len(before.agents) > 1:
        return None
    closed = next((h for h in after.history if h.attempt == before.attempt), None)
    if closed is None or closed.outcome != LOST_OUTCOME or closed.agent != before.agent:
        return None
    return before.agent

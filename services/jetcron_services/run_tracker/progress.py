"""What the reconciler must know before it calls a run lost: has the tracker read every report that could have
been sent for it, and is the agent it was assigned to still alive and working through its queue?

An agent publishes its finish report (and has it acked) before it releases the run lease. A lease may also
lapse while the report still waits on its agent: a herd's reports queue there for minutes, and an attempt whose
child has ended no longer renews. So while its agent is alive and its heartbeat says reports are still queued
or in flight, a run whose lease is gone may yet be reported, and is not called lost (`may_still_report`). Once
a heartbeat says none are left (or the agent is gone), every report it sent was acked before that, so every
report about the run sits in JC_EVENTS at or below the stream's last sequence read after that look; when the
tracker's consumer has acked up to there, a run still not terminal really was lost. Without this, a tracker
that falls behind under load would see released leases of finished runs, re-dispatch them, and then drop their
reports as stale (a retry storm that also spends no retry budget).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

from jetcron.core.errors import JetcronError, NotFound
from jetcron.core.lifecycle.reconcile import Beat, beat_seen, first_sight, may_still_report
from jetcron.wire import subjects as s
from jetcron_services.run_tracker.ports import ProgressPorts


class Progress:
    def __init__(self, ctx: ProgressPorts, clock: Callable[[], float] = time.monotonic) -> None:
        self.ctx = ctx
        self.read_up_to = -1
        """The tracker consumer's ack floor at the start of this sweep (-1: unknown, so nobody is lost)."""
        self._agents: dict[str, bool] = {}
        self._reporting: dict[str, bool] = {}
        self._beats: dict[str, Beat] = {}
        """Agent -> its heartbeat record as last read."""
        self.watched: Mapping[str, Beat] = {}
        """Agent -> its record's revision and when the agents watch first delivered it, on the same clock
        (jetcron_services.run_tracker.agents.AgentLosses.beats): a record that has stood still since long before the
        first question counts from then. Counted from the question, a killed agent whose last heartbeat named a queued
        report would hold its runs back three heartbeats past its lease (90 s at the design's heartbeat)."""
        self._clock = clock

    async def refresh(self) -> None:
        """At the start of a sweep."""
        self._agents.clear()
        self._reporting.clear()
        try:
            self.read_up_to = (await self.ctx.streams.consumer(s.STREAM_EVENTS, s.CONSUMER_TRACKER)).ack_floor
        except Exception:
            self.read_up_to = -1

    async def horizon(self) -> int:
        """The events stream's last sequence now (read after the lease looks it bounds)."""
        return (await self.ctx.streams.state(s.STREAM_EVENTS)).last_seq

    async def agent_idle_or_gone(self, agent: str) -> bool:
        """An assignment not started is stalled only if its agent is gone (no heartbeat) or has nothing
        left in its queue; a live agent working through a backlog will get to it."""
        if agent in self._agents:
            return self._agents[agent]
        try:
            alive = await self.ctx.agents.maybe(agent) is not None
            idle = True
            if alive:
                try:
                    state = await self.ctx.streams.consumer(s.STREAM_ASSIGN, s.assign_consumer(agent))
                    idle = not (state.pending or state.ack_pending)
                except NotFound:
                    idle = True
        except (JetcronError, Exception):
            idle = False  # unknown: do not call anything lost on a guess
        self._agents[agent] = idle
        return idle

    async def may_still_report(self, agent: str) -> bool:
        """Whether the agent may still send reports (jetcron.core.lifecycle.reconcile.may_still_report): one may be this
        run's. Unknown (a read failed): True, nothing is called lost on a guess. Asked once per agent per sweep."""
        if agent in self._reporting:
            return self._reporting[agent]
        try:
            found = await self.ctx.agents.maybe(agent)
        except JetcronError:
            pending = True
        else:
            pending = False
            if found is not None:
                now = self._clock()
                beat = self._beats[agent] = first_sight(beat_seen(self._beats.get(agent), found[1], now),
                                                        self.watched.get(agent))
                pending = may_still_report(found[0].pending_reports, beat, now, self.ctx.settings.heartbeat)
        self._reporting[agent] = pending
        return pending

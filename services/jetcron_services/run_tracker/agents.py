"""Agents lost, counted by the tracker: an agent that dies cannot count its own death
(jetcron.core.lifecycle.departures)."""

from __future__ import annotations

import time
from collections.abc import Callable

from jetcron.core.errors import JetcronError
from jetcron.core.lifecycle import departures
from jetcron.core.lifecycle.departures import Found
from jetcron.core.lifecycle.reconcile import Beat, beat_seen
from jetcron.telemetry import metrics
from jetcron_services.run_tracker.ports import AgentLossesPorts


class AgentLosses:
    """Every replica watches the agents bucket (a standby is warm when it takes over); only the leader looks up
    the agents whose record stood still and counts the lost ones. A standby forgets them without a count: the
    leader counted them, and a new leader wins within a lease TTL, long before an entry ages out."""

    def __init__(self, ctx: AgentLossesPorts, clock: Callable[[], float] = time.monotonic) -> None:
        self.ctx = ctx
        self.beats: dict[str, Beat] = {}
        """Agent -> its record's revision and when we first saw it (our monotonic clock)."""
        self._clock = clock
        self._checked = 0.0

    async def watch(self) -> None:
        async for agent, info, revision in self.ctx.agents.watch():
            if not agent:
                continue
            if info is None:
                self.beats.pop(agent, None)  # deleted its entry: a clean exit, not a loss
            else:
                self.beats[agent] = beat_seen(self.beats.get(agent), revision, self._clock())

    async def maybe_check(self, leading: bool) -> None:
        """Once a heartbeat interval (the sweeps come every 0.25 s)."""
        now = self._clock()
        if now - self._checked >= self.ctx.settings.heartbeat:
            self._checked = now
            await self.check(leading)

    async def check(self, leading: bool) -> int:
        """Look up the agents standing still past the entry's age; count those gone when leading. How many."""
        now = self._clock()
        lost = 0
        for agent in departures.standing_still(self.beats, now, self.ctx.settings.agent_entry_seconds):
            beat = self.beats[agent]
            if not leading:
                del self.beats[agent]
                continue
            try:
                found = await self.ctx.agents.maybe(agent)
            except JetcronError:
                continue  # unknown: nothing is counted on a guess; looked up again next time
            match departures.judge(beat, None if found is None else found[1]):
                case Found.LOST:
                    lost += 1
                    self.beats.pop(agent, None)
                    self.ctx.log.warning("agent lost: its entry aged out without a clean exit", agent=agent)
                case Found.ALIVE:
                    assert found is not None
                    self.beats[agent] = Beat(found[1], now)
                case Found.WAIT:
                    pass
        if leading:
            metrics.AGENTS_LOST.inc(lost)
            metrics.AGENTS_ALIVE.set(len(self.beats))
        return lost

    def lost_lead(self) -> None:
        """Only the leader speaks for the agents seen alive."""
        metrics.AGENTS_ALIVE.set(0)

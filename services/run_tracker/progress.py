"""What the reconciler must know before it calls a run lost: has the tracker read every report that could have
been sent for it, and is the agent it was assigned to still alive and working through its queue?

An agent publishes its finish report (and has it acked) before it releases the run lease, and a lease that
lapsed did so after any report its holder sent. So once a run's lease is seen gone, every report about it sits
in JC_EVENTS at or below the stream's last sequence read after that look; when the tracker's consumer has acked
up to there, a run still not terminal really was lost. Without this, a tracker that falls behind under load
would see released leases of finished runs, re-dispatch them, and then drop their reports as stale (a retry
storm that also spends no retry budget).
"""

from __future__ import annotations

import nats.js.errors as jse

from jetcron.bus.kv import translate
from jetcron.core.errors import JetcronError
from jetcron.services.runtime import Context
from jetcron.wire import subjects as s


class Progress:
    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.read_up_to = -1
        """The tracker consumer's ack floor at the start of this sweep (-1: unknown, so nobody is lost)."""
        self._agents: dict[str, bool] = {}

    async def refresh(self) -> None:
        """At the start of a sweep."""
        self._agents.clear()
        try:
            info = await self.ctx.js.consumer_info(s.STREAM_EVENTS, s.CONSUMER_TRACKER)
            self.read_up_to = int(info.ack_floor.stream_seq or 0) if info.ack_floor else 0
        except Exception:
            self.read_up_to = -1

    async def horizon(self) -> int:
        """The events stream's last sequence now (read after the lease looks it bounds)."""
        try:
            return int((await self.ctx.js.stream_info(s.STREAM_EVENTS)).state.last_seq)
        except Exception as exc:
            raise translate(exc, "events stream state") from exc

    def reports_read(self, seq: int) -> bool:
        return self.read_up_to >= seq

    async def agent_idle_or_gone(self, agent: str | None) -> bool:
        """An assignment not started is stalled only if its agent is gone (no heartbeat) or has nothing
        left in its queue; a live agent working through a backlog will get to it."""
        if not agent:
            return True
        if agent in self._agents:
            return self._agents[agent]
        try:
            alive = await self.ctx.agents.maybe(agent) is not None
            idle = True
            if alive:
                try:
                    info = await self.ctx.js.consumer_info(s.STREAM_ASSIGN, s.assign_consumer(agent))
                    idle = not (info.num_pending or info.num_ack_pending)
                except jse.NotFoundError:
                    idle = True
        except (JetcronError, Exception):
            idle = False  # unknown: do not call anything lost on a guess
        self._agents[agent] = idle
        return idle

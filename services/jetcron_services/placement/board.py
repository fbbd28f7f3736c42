"""Placement's small KV board (jc_placement): the capacity summary the API reads, and suspect GPU hosts."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from datetime import datetime

import msgspec

from jetcron.bus.ports import Records
from jetcron.core.errors import JetcronError
from jetcron.core.models import AgentInfo
from jetcron.core.placing.capacity import CapacitySummary, summarize
from jetcron.wire import subjects as s
from jetcron.wire.messages import QueueDepths


class SuspectMark(msgspec.Struct, frozen=True, kw_only=True):
    """A GPU host that missed heartbeats; deleted once a health check passed after `lost_after`."""

    agent_id: str
    lost_after: datetime
    """Its last heartbeat before it went missing (the agent's clock)."""


class Board:
    def __init__(self, capacity: Records[CapacitySummary], suspects: Records[SuspectMark],
                 depths: Records[QueueDepths] | None = None) -> None:
        self.capacity = capacity
        self.suspects = suspects
        self.depths = depths

    async def put_capacity(self, agents: Iterable[AgentInfo], now: datetime) -> None:
        await self.capacity.put(s.CAPACITY_KEY, summarize(agents, now))

    async def put_depths(self, depths: QueueDepths) -> None:
        if self.depths is not None:
            await self.depths.put(s.PENDING_KEY, depths)

    async def mark_suspect(self, agent_id: str, lost_after: datetime | None) -> None:
        """Record (or, with None, clear) a suspect host; best effort: every replica also judges for itself."""
        with contextlib.suppress(JetcronError):
            if lost_after is None:
                await self.suspects.delete(s.suspect_key(agent_id))
            else:
                await self.suspects.put(s.suspect_key(agent_id), SuspectMark(agent_id=agent_id,
                                                                             lost_after=lost_after))

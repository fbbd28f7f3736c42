"""Placement's live view: agents from the agents bucket, reservations released when runs end."""

from __future__ import annotations

import asyncio
import time

from nats.js.api import DeliverPolicy

from jetcron.core.fairness import FairQueue
from jetcron.core.placement import Cluster, Demand
from jetcron.services.runtime import Context
from jetcron.wire import subjects as s
from jetcron.wire.codec import decode
from jetcron.wire.messages import RunFinished, RunHandedBack


class View:
    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.cluster = Cluster()
        self.queue = FairQueue()
        self.placed: dict[str, Demand] = {}
        self.seen: dict[str, float] = {}
        self.changed = asyncio.Event()

    async def watch_agents(self) -> None:
        async for agent_id, info, _ in self.ctx.agents.watch():
            if not agent_id:
                continue
            if info is None:
                self.forget_agent(agent_id)
                continue
            self.seen[agent_id] = time.monotonic()
            self.cluster.upsert_agent(info)
            self.changed.set()

    async def watch_tenants(self) -> None:
        async for _, policy, _ in self.ctx.tenants.watch():
            if policy is not None:
                self.queue.set_policy(policy)
                self.changed.set()

    def forget_agent(self, agent_id: str) -> None:
        self.seen.pop(agent_id, None)
        for run_id in self.cluster.remove_agent(agent_id):
            self.release(run_id)

    async def expire_agents(self) -> None:
        """An agent that stopped heartbeating is removed (the bucket's max_age sends no event)."""
        limit = self.ctx.settings.heartbeat * 4
        while not self.ctx.stop.is_set():
            now = time.monotonic()
            for agent_id, at in list(self.seen.items()):
                if now - at > limit:
                    self.forget_agent(agent_id)
            await asyncio.sleep(self.ctx.settings.heartbeat)

    def release(self, run_id: str) -> None:
        demand = self.placed.pop(run_id, None)
        self.cluster.release(run_id)
        if demand is not None:
            self.queue.refund(demand)
            self.changed.set()

    async def watch_endings(self) -> None:
        """Release reservations as runs end, from the events stream (new events only)."""
        sub = await self.ctx.js.subscribe(s.EVENTS_ALL, ordered_consumer=True, deliver_policy=DeliverPolicy.NEW)
        try:
            async for msg in sub.messages:
                kind = msg.subject.rsplit(".", 1)[-1]
                if kind == "finished":
                    self.release(decode(msg.data, RunFinished).run_id)
                elif kind == "handed_back":
                    self.release(decode(msg.data, RunHandedBack).run_id)
        finally:
            await sub.unsubscribe()

"""Placement's view of the cluster: agents, suspect GPU hosts, tenants' policies, and the capacity it publishes."""

from __future__ import annotations

import asyncio
import contextlib
import time
from abc import ABC, abstractmethod
from datetime import datetime

from jetcron.core.errors import JetcronError
from jetcron.core.models import AgentInfo, TenantPolicy
from jetcron.core.placing.fairness import FairQueue
from jetcron.core.placing.placement import Cluster
from jetcron.core.placing.suspects import Suspects
from jetcron.wire import subjects as s
from jetcron.wire.messages import QueueDepths
from jetcron_services.placement.board import Board
from jetcron_services.placement.ports import ClusterViewPorts


class ClusterView(ABC):
    """The agents side of placement's view (View adds the reservations its run records hold): the cluster's books
    and the fair queue both sides share, every agent seen, the suspects, and what the leader publishes of them."""

    def __init__(self, ctx: ClusterViewPorts, board: Board | None = None) -> None:
        self.ctx = ctx
        self.board = board
        self.cluster = Cluster()
        self.queue = FairQueue(ageing_seconds=ctx.settings.placement_ageing_seconds)
        self.suspects = Suspects()
        self.leading = False
        self.policies: dict[str, TenantPolicy] = {}
        """Every tenant's policy, as the tenants bucket last said (preemption reads it: preempt.py)."""
        self.seen: dict[str, tuple[float, AgentInfo]] = {}
        self.lapsed: set[str] = set()
        """Agents off the books since a run of theirs was lost with their lease
        (jetcron.core.lifecycle.departures.lapsed_with), until a newer heartbeat: still in `seen`, so that missing
        heartbeats still make a GPU host suspect."""
        self.changed = asyncio.Event()
        self.agents_synced = asyncio.Event()
        self._tasks: set[asyncio.Future[None]] = set()

    @abstractmethod
    def _back(self, agent_id: str) -> None:
        """An agent back after an absence: the runs whose records still name it hold their share on it again."""

    async def watch_agents(self) -> None:
        async for agent_id, info, _ in self.ctx.agents.watch():
            if not agent_id:
                self.agents_synced.set()
                continue
            if info is None:
                self.forget_agent(agent_id)  # a clean exit (drained agent deleted its key): not suspect
                continue
            self.upsert_agent(info)

    def upsert_agent(self, info: AgentInfo) -> None:
        old = self.seen.get(info.agent_id)
        if info.agent_id in self.lapsed:
            if old is not None and info.heartbeat_at <= old[1].heartbeat_at:
                return  # the heartbeat it was taken off the books after, delivered again
            self.lapsed.discard(info.agent_id)
            old = None  # back: on the books again, with its runs
        known = old is not None
        self.seen[info.agent_id] = (time.monotonic(), info)
        if old is not None and _same(old[1], info):
            # A plain heartbeat: refresh the agent but wake no placement pass (thousands arrive per second).
            self.cluster.upsert_agent(info)
            return
        self.cluster.upsert_agent(info)
        self._judge(info)
        if not known:
            self._back(info.agent_id)
        self.changed.set()

    def _judge(self, info: AgentInfo) -> None:
        was_lost = info.agent_id in self.suspects
        why = self.suspects.check(info)
        if why is None:
            self.cluster.clear_suspect(info.agent_id)
            if was_lost:
                self.ctx.log.info("GPU host cleared by a passing health check", agent=info.agent_id)
                self._persist(info.agent_id, None)
        else:
            self.cluster.mark_suspect(info.agent_id)

    async def watch_tenants(self) -> None:
        async for _, policy, _ in self.ctx.tenants.watch():
            if policy is not None:
                self.policies[policy.tenant] = policy
                self.queue.set_policy(policy)
                self.changed.set()

    def forget_agent(self, agent_id: str) -> None:
        """Drop it from the books; its runs' reservations go when their records move on (no early reuse)."""
        self.seen.pop(agent_id, None)
        self.lapsed.discard(agent_id)
        self.cluster.remove_agent(agent_id)
        self.changed.set()

    async def expire_agents(self) -> None:
        """An agent that stopped heartbeating is removed (the bucket's max_age sends no event).

        One that held GPUs comes back suspect.
        """
        limit = self.ctx.settings.heartbeat * 4
        while not self.ctx.stop.is_set():
            now = time.monotonic()
            for agent_id, (at, info) in list(self.seen.items()):
                if now - at > limit:
                    if self.suspects.lost(info):
                        self.ctx.log.warning("GPU host missed heartbeats: suspect until a health check passes",
                                             agent=agent_id)
                        self._persist(agent_id, self.suspects.lost_after(agent_id))
                    self.forget_agent(agent_id)
            await asyncio.sleep(self.ctx.settings.heartbeat)

    def _persist(self, agent_id: str, lost_after: datetime | None) -> None:
        """The leader keeps suspects in KV so a placement started later still knows them."""
        if self.leading and self.board is not None:
            task = asyncio.ensure_future(self.board.mark_suspect(agent_id, lost_after))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def watch_suspects(self) -> None:
        if self.board is None:
            return
        async for key, mark, _ in self.board.suspects.watch(s.SUSPECTS):
            if not key or mark is None:
                continue
            self.suspects.restore(mark.agent_id, mark.lost_after)
            known = self.seen.get(mark.agent_id)
            if known is not None:
                self._judge(known[1])

    def _lapse(self, agent_id: str, run_id: str) -> None:
        """Take an agent off the books: a run of its was lost with its lease. It is back at its next heartbeat."""
        if agent_id in self.seen and agent_id not in self.lapsed:
            self.ctx.log.info("agent off the books: a run of its was lost with its lease; back at its next heartbeat",
                              agent=agent_id, run_id=run_id)
            self.lapsed.add(agent_id)
            self.cluster.remove_agent(agent_id)
            self.changed.set()

    async def publish_capacity(self, stop: asyncio.Event, every: float = 1.0, refresh: float = 30.0) -> None:
        """While leading: put the summary when an agent joins, leaves or changes size (and now and then), and
        the queue depths per tenant when they changed (the api's pending-runs cap reads them)."""
        if self.board is None:
            return
        version, last = -1, 0.0
        depths: dict[str, int] | None = None
        while not stop.is_set():
            now = time.monotonic()
            if self.cluster.shape_version != version or now - last > refresh:
                version, last = self.cluster.shape_version, now
                with contextlib.suppress(JetcronError):
                    await self.board.put_capacity(self.cluster.agents(), self.ctx.clock.now())
            waiting = self.queue.waiting_by_tenant()
            if waiting != depths:
                with contextlib.suppress(JetcronError):
                    await self.board.put_depths(QueueDepths(at=self.ctx.clock.now(), by_tenant=waiting))
                    depths = waiting
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=every)


def _same(a: AgentInfo, b: AgentInfo) -> bool:
    """Nothing placement decides on changed (free capacity comes from its own books, not the heartbeat)."""
    return (a.cpu, a.memory_mb, a.gpus, a.gpu_model, a.gpu_indices, a.labels, a.capabilities, a.draining,
            a.gpu_health_ok, a.gpu_health_at) == (b.cpu, b.memory_mb, b.gpus, b.gpu_model, b.gpu_indices, b.labels,
                                                  b.capabilities, b.draining, b.gpu_health_ok, b.gpu_health_at)

"""The agent's own lease (liveness per agent): one renewal every TTL/3 keeps all its runs alive, and losing it
fences every attempt bound to it.

Each run claim the agent takes names this lease's nonce (LeaseValue.bound); the tracker judges such a claim alive
while the agent's lease still carries that nonce (jetcron.core.lifecycle.reconcile), by the server's clock. So 50,000
runs in flight on 10,000 agents cost the agents' renewals, not the runs'. The rules a run lease kept hold for this one:
renewed at TTL/3, revision-checked, and the agent stops its children itself once it has not renewed by TTL minus a
margin on its own monotonic clock (a SIGSTOP or a partition), before the server can have expired the lease. A cancel's
stop notice written on the lease (Leases.notify_stops) makes the next renewal fail its revision check: the renewal reads
it, hands its stops on, and renews over it.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable

from jetcron.bus.lease import Lease, Stop
from jetcron.core.errors import JetcronError, LeaseLost
from jetcron.core.lifecycle import leases
from jetcron.telemetry import metrics
from jetcron_services.agent.ports import AgentLivenessPorts

RETAKE_EVERY = 0.5
"""Seconds between tries to take the lease while an earlier life's claim is still live."""


class AgentLiveness:
    """Holds the agent's lease from before its first assignment until its attempts have drained."""

    def __init__(self, ctx: AgentLivenessPorts, agent_id: str, *, lost: Callable[[str, str], None],
                 stops: Callable[[tuple[Stop, ...]], None]) -> None:
        self.ctx, self.agent_id = ctx, agent_id
        self.lost = lost
        """Told (the lost lease's nonce, why) when the lease is lost: every attempt bound to it must stop."""
        self.stops = stops
        """Told of the stops a notice on the lease carried."""
        self.lease: Lease | None = None
        self.renewed = 0.0
        """Monotonic time the last write that landed was sent: the server's expiry is never earlier than this + TTL."""
        self.finished = asyncio.Event()
        """Set once the agent has drained: the lease is kept until then (attempts run on through the drain)."""

    @property
    def nonce(self) -> str:
        """What a run claim taken now is bound to; "" while the lease is not held (no assignment is taken then)."""
        return self.lease.value.nonce if self.lease is not None else ""

    async def take(self) -> bool:
        """Take the lease, waiting while an earlier life's claim is still live (it expires within its TTL); False
        if the agent is stopping first (nothing new is taken then)."""
        ttl, told = self.ctx.settings.run_lease_ttl, False
        while not (self.finished.is_set() or self.ctx.stop.is_set()):
            sent = time.monotonic()
            with contextlib.suppress(JetcronError):
                lease = await self.ctx.leases.hold_agent(self.agent_id, ttl)
                if lease is not None:
                    self.lease, self.renewed = lease, sent
                    return True
                if not told:
                    self.ctx.log.info("agent lease still held by an earlier life: waiting for it to expire",
                                      agent=self.agent_id)
                    told = True
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.finished.wait(), timeout=RETAKE_EVERY)
        return False

    async def keep(self) -> None:
        """Renew at TTL/3 until finished; lose the lease (fencing its attempts) when it is taken, lost, or not
        renewed in time, and take it afresh."""
        ttl = self.ctx.settings.run_lease_ttl
        while not self.finished.is_set():
            if self.lease is None:
                if not await self.take():
                    await self.finished.wait()
                    return
                continue
            with contextlib.suppress(TimeoutError):
                wait = leases.renew_at(self.renewed, ttl, ttl) - time.monotonic()
                await asyncio.wait_for(self.finished.wait(), timeout=max(0.0, wait))
            if self.finished.is_set():
                return
            await self.renew()

    async def renew(self) -> None:
        """One renewal, bounded by the self-fencing deadline (last renewal sent + TTL - margin)."""
        if self.lease is None:
            return
        ttl = self.ctx.settings.run_lease_ttl
        deadline = leases.fence_at(self.renewed, ttl, ttl)
        sent = time.monotonic()
        if sent >= deadline:
            self._lose(f"agent lease not renewed for {sent - self.renewed:.1f}s (paused or cut off)")
            return
        try:
            self.lease, stops = await asyncio.wait_for(self.ctx.leases.renew_agent(self.lease, ttl),
                                                       timeout=deadline - sent)
            self.renewed = sent
            if stops:
                self.stops(stops)
        except LeaseLost:
            self._lose("agent lease lost (expired, or taken by another life of this agent)")
        except (JetcronError, TimeoutError):
            metrics.HEARTBEAT_FAILURES.inc()
            if time.monotonic() >= deadline:
                self._lose("agent lease could not be renewed in time")

    def _lose(self, why: str) -> None:
        nonce, self.lease = self.nonce, None
        self.ctx.log.warning("agent lease lost: its attempts are stopped", agent=self.agent_id, reason=why)
        self.lost(nonce, why)

    async def release(self) -> None:
        """Drained: give the lease up, so that any claim still bound to it is judged lost at once."""
        lease, self.lease = self.lease, None
        if lease is not None:
            with contextlib.suppress(JetcronError):
                await self.ctx.leases.release(lease)

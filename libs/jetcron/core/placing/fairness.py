"""The order waiting runs are tried in: priority with ageing, then deficit round-robin across tenants, and
round-robin across a tenant's named queues inside its share."""

from __future__ import annotations

import math
from collections.abc import Generator, Iterator
from datetime import datetime, timedelta

import msgspec

from jetcron.core.errors import InvalidSpec
from jetcron.core.models import Priority, TenantPolicy
from jetcron.core.placing.fairness_quotas import QuotaBooks, validate_queue_quotas
from jetcron.core.placing.fairness_waiting import LEVELS, Entry, WaitingDemands
from jetcron.core.placing.placement import Demand

__all__ = ["FairQueue", "validate_queue_quotas"]

# One placement costs one unit of deficit: fairness is counted in placements, quotas cap resources.
COST = 1.0
_DONE, _SHORT, _ALIVE = "done", "short", "alive"


class FairQueue:
    """Waiting demands in service order.

    The caller's loop::

        for d in q.candidates(now):
            if reason := q.quota_block(d):
                continue                      # stays queued; show `reason`
            result = cluster.place(d)
            if isinstance(result, Placement):
                q.remove(d.run_id)
                q.charge(d)                   # before asking for the next candidate

    Deficits move only when a demand is charged right after candidates() offered it, so a
    skipped demand (quota, no room) costs its tenant nothing, and charges made elsewhere
    (re-counting running work after a restart) do not disturb the round-robin. A tenant keeps
    its turn across passes until its deficit is spent; only then does it go to the back.
    """

    def __init__(
        self, policies: dict[str, TenantPolicy] | None = None, quantum: float = 1.0,
        ageing_seconds: float = 300.0,
    ) -> None:
        if not (math.isfinite(quantum) and quantum > 0):
            raise InvalidSpec("quantum", quantum, "must be a positive number")
        if not (math.isfinite(ageing_seconds) and ageing_seconds > 0):
            raise InvalidSpec("ageing_seconds", ageing_seconds, "must be a positive number")
        self._quantum = quantum
        self._policies: dict[str, TenantPolicy] = {}
        for policy in (policies or {}).values():
            self.set_policy(policy)
        self._waiting = WaitingDemands(timedelta(seconds=ageing_seconds))
        # Insertion-ordered: the first tenant has the turn.
        self._ring: dict[str, None] = {}
        self._deficit: dict[tuple[int, str], float] = {}
        self._books = QuotaBooks()
        self._offered: tuple[int, str, str] | None = None
        self._served = False

    def __len__(self) -> int:
        return len(self._waiting)

    def __contains__(self, run_id: object) -> bool:
        return run_id in self._waiting

    def waiting_by_tenant(self) -> dict[str, int]:
        """How many demands each tenant has queued (tenants with none left out)."""
        return self._waiting.by_tenant()

    def waiting(self, tenant: str) -> int:
        """How many demands of the tenant are queued."""
        return self._waiting.count(tenant)


    def set_policy(self, policy: TenantPolicy) -> None:
        if not (math.isfinite(policy.weight) and policy.weight > 0):
            raise InvalidSpec("weight", policy.weight, f"tenant {policy.tenant}: must be a positive number")
        self._policies[policy.tenant] = policy

    def push(self, demand: Demand) -> None:
        """Queue a demand; pushing a run already queued keeps its original place."""
        if self._waiting.push(demand):
            self._ring.setdefault(demand.tenant, None)

    def reprioritize(self, run_id: str, priority: Priority, queue: str) -> bool:
        """Move a queued demand to another priority and queue (its place in time kept: it ages from when it was
        first queued); False when it is not queued."""
        demand = self._waiting.get(run_id)
        if demand is None:
            return False
        if (demand.priority, demand.queue) == (priority, queue):
            return True
        self.remove(run_id)
        self.push(msgspec.structs.replace(demand, priority=priority, queue=queue))
        return True

    def remove(self, run_id: str) -> None:
        """Drop a placed or cancelled demand; unknown ids are ignored."""
        demand = self._waiting.remove(run_id)
        if demand is None or self._waiting.count(demand.tenant):
            return
        # An idle tenant forfeits its deficit, as in DRR: it cannot bank credit while away.
        self._ring.pop(demand.tenant, None)
        for level in range(LEVELS):
            self._deficit.pop((level, demand.tenant), None)

    def level(self, demand: Demand, now: datetime) -> int:
        """Effective priority rank: one level up per ageing period waited, never above critical."""
        return self._waiting.level(demand, now)

    def candidates(self, now: datetime) -> Iterator[Demand]:
        """Every queued demand once, in service order (see the class docstring)."""
        try:
            for level in range(LEVELS):
                streams = {t: s for t in self._ring if (s := self._waiting.stream(t, level, now)) is not None}
                order = list(streams)
                while order:
                    alive, short = [], 0
                    for tenant in order:
                        turn = yield from self._visit(level, tenant, streams[tenant])
                        if turn != _DONE:
                            alive.append(tenant)
                        short += turn == _SHORT
                    order = alive
                    if order and short == len(order):
                        self._fast_forward(level, order)
        finally:
            # A caller that stops early must not leave an offer open for a later, unrelated charge.
            self._offered = None

    def _visit(self, level: int, tenant: str, stream: Iterator[Entry]) -> Generator[Demand, None, str]:
        """One DRR turn: offer demands while the deficit lasts, stop at the first one passed over.

        Returns _DONE when the tenant has nothing left to offer in this pass, _SHORT when its
        deficit was too small to offer anything, else _ALIVE.
        """
        key = (level, tenant)
        deficit = self._deficit.get(key, 0.0)
        if deficit < COST:
            # Refill only when short, so a tenant passed over for many turns cannot bank a burst.
            deficit = self._deficit[key] = deficit + self._quantum * self._weight(tenant)
            if deficit < COST:
                self._to_back(tenant)
                return _SHORT
        while self._deficit.get(key, 0.0) >= COST:
            entry = next(stream, None)
            if entry is None:
                return _DONE
            demand = self._waiting.get(entry[2])
            if demand is None:
                continue
            self._offered, self._served = (level, tenant, entry[2]), False
            yield demand
            self._offered = None
            if not self._served:
                break
        return _ALIVE

    def _fast_forward(self, level: int, tenants: list[str]) -> None:
        """Skip the empty rounds small weights would need: credit all until one can be served next."""
        grant = {t: self._quantum * self._weight(t) for t in tenants}
        rounds = min(math.ceil((COST - self._deficit.get((level, t), 0.0)) / grant[t]) for t in tenants)
        for t in tenants:
            self._deficit[(level, t)] = self._deficit.get((level, t), 0.0) + (rounds - 1) * grant[t]

    def _to_back(self, tenant: str) -> None:
        if tenant in self._ring:
            del self._ring[tenant]
            self._ring[tenant] = None


    def _weight(self, tenant: str) -> float:
        policy = self._policies.get(tenant)
        return 1.0 if policy is None else policy.weight

    def quota_block(self, demand: Demand) -> str | None:
        """None if placing the demand keeps its named queue and its tenant within their quotas, else why not (the
        queue's quota is named first when both are reached: it is the narrower one)."""
        return self._books.block(demand, self._policies.get(demand.tenant))

    def charge(self, demand: Demand) -> None:
        """Count a placed demand against its tenant's quota; charging a run twice counts it once."""
        if self._offered is not None and self._offered[2] == demand.run_id:
            level, tenant, _ = self._offered
            if tenant in self._ring:
                # A tenant whose last demand this was has left the ring and forfeits its deficit.
                left = self._deficit[(level, tenant)] = self._deficit.get((level, tenant), 0.0) - COST
                if left < COST:
                    # Turn spent: to the back, here rather than in the pass, which may be abandoned.
                    self._to_back(tenant)
            # This queue was served: the tenant's next pass starts with its other queues.
            self._waiting.served(tenant, demand.queue)
            self._served = True
        self._books.charge(demand)

    def refund(self, demand: Demand) -> None:
        """Give back what charge() counted for this run (finished, cancelled, lost), to its tenant and its queue."""
        self._books.refund(demand)

    def usage(self, tenant: str) -> tuple[float, int, int]:
        """The tenant's charged cpu, memory in MB and GPUs."""
        return self._books.usage(tenant)

    def queue_usage(self, tenant: str, queue: str) -> tuple[float, int, int]:
        """What the tenant's runs of one named queue hold: cpu, memory in MB and GPUs."""
        return self._books.queue_usage(tenant, queue)

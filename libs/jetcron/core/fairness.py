"""The order waiting runs are tried in: priority with ageing, then deficit round-robin across tenants, and
round-robin across a tenant's named queues inside its share."""

from __future__ import annotations

import heapq
import itertools
import math
from bisect import bisect_right, insort
from collections.abc import Generator, Iterator
from datetime import datetime, timedelta
from typing import TypeVar

import msgspec

from jetcron.core.agents_index import to_mcpu
from jetcron.core.errors import InvalidSpec
from jetcron.core.ids import QUEUE_RE
from jetcron.core.models import Priority, QueueQuota, TenantPolicy
from jetcron.core.placement import Demand

__all__ = ["FairQueue", "validate_queue_quotas"]

LEVELS = 4
# One placement costs one unit of deficit: fairness is counted in placements, quotas cap resources.
COST = 1.0
_LAST = 1 << 62  # sorts after every sequence number, so a bisect probe includes equal times
_DONE, _SHORT, _ALIVE = "done", "short", "alive"

_Entry = tuple[datetime, int, str]
_K = TypeVar("_K", str, tuple[str, str])


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
        self._ageing = timedelta(seconds=ageing_seconds)
        self._policies: dict[str, TenantPolicy] = {}
        for policy in (policies or {}).values():
            self.set_policy(policy)
        self._items: dict[str, tuple[Demand, _Entry]] = {}
        self._queues: dict[tuple[str, str, int], list[_Entry]] = {}
        self._per_tenant: dict[str, int] = {}
        self._per_queue: dict[tuple[str, str], int] = {}
        # Per tenant, its named queues with demands, insertion-ordered: the first has the turn inside the tenant.
        self._queue_ring: dict[str, dict[str, None]] = {}
        self._seq = itertools.count()
        # Insertion-ordered: the first tenant has the turn.
        self._ring: dict[str, None] = {}
        self._deficit: dict[tuple[int, str], float] = {}
        self._usage: dict[str, tuple[int, int, int]] = {}
        self._queue_usage: dict[tuple[str, str], tuple[int, int, int]] = {}
        # Per charged run: its tenant and queue, and what it holds (mcpu, MB, gpus).
        self._charged: dict[str, tuple[str, str, tuple[int, int, int]]] = {}
        self._offered: tuple[int, str, str] | None = None
        self._served = False

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, run_id: object) -> bool:
        return run_id in self._items

    def waiting_by_tenant(self) -> dict[str, int]:
        """How many demands each tenant has queued (tenants with none left out)."""
        return dict(self._per_tenant)

    def waiting(self, tenant: str) -> int:
        """How many demands of the tenant are queued."""
        return self._per_tenant.get(tenant, 0)

    def set_policy(self, policy: TenantPolicy) -> None:
        if not (math.isfinite(policy.weight) and policy.weight > 0):
            raise InvalidSpec("weight", policy.weight, f"tenant {policy.tenant}: must be a positive number")
        self._policies[policy.tenant] = policy

    def push(self, demand: Demand) -> None:
        """Queue a demand; pushing a run already queued keeps its original place."""
        if demand.run_id in self._items:
            return
        entry = (demand.enqueued_at, next(self._seq), demand.run_id)
        self._items[demand.run_id] = (demand, entry)
        insort(self._queues.setdefault((demand.tenant, demand.queue, demand.priority.rank), []), entry)
        self._per_tenant[demand.tenant] = self._per_tenant.get(demand.tenant, 0) + 1
        named = (demand.tenant, demand.queue)
        self._per_queue[named] = self._per_queue.get(named, 0) + 1
        self._queue_ring.setdefault(demand.tenant, {}).setdefault(demand.queue, None)
        self._ring.setdefault(demand.tenant, None)

    def reprioritize(self, run_id: str, priority: Priority, queue: str) -> bool:
        """Move a queued demand to another priority and queue (its place in time kept: it ages from when it was
        first queued); False when it is not queued."""
        item = self._items.get(run_id)
        if item is None:
            return False
        demand = item[0]
        if (demand.priority, demand.queue) == (priority, queue):
            return True
        self.remove(run_id)
        self.push(msgspec.structs.replace(demand, priority=priority, queue=queue))
        return True

    def remove(self, run_id: str) -> None:
        """Drop a placed or cancelled demand; unknown ids are ignored."""
        item = self._items.pop(run_id, None)
        if item is None:
            return
        demand, entry = item
        key = (demand.tenant, demand.queue, demand.priority.rank)
        queue = self._queues[key]
        del queue[bisect_right(queue, entry) - 1]
        if not queue:
            del self._queues[key]
        named = (demand.tenant, demand.queue)
        self._per_queue[named] -= 1
        if not self._per_queue[named]:
            del self._per_queue[named]
            ring = self._queue_ring[demand.tenant]
            ring.pop(demand.queue, None)
            if not ring:
                del self._queue_ring[demand.tenant]
        self._per_tenant[demand.tenant] -= 1
        if not self._per_tenant[demand.tenant]:
            # An idle tenant forfeits its deficit, as in DRR: it cannot bank credit while away.
            del self._per_tenant[demand.tenant]
            self._ring.pop(demand.tenant, None)
            for level in range(LEVELS):
                self._deficit.pop((level, demand.tenant), None)

    def level(self, demand: Demand, now: datetime) -> int:
        """Effective priority rank: one level up per ageing period waited, never above critical."""
        promoted = max(0, (now - demand.enqueued_at) // self._ageing)
        return max(0, demand.priority.rank - promoted)

    def candidates(self, now: datetime) -> Iterator[Demand]:
        """Every queued demand once, in service order (see the class docstring)."""
        try:
            for level in range(LEVELS):
                streams = {t: s for t in self._ring if (s := self._stream(t, level, now)) is not None}
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

    def _visit(self, level: int, tenant: str, stream: Iterator[_Entry]) -> Generator[Demand, None, str]:
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
            item = self._items.get(entry[2])
            if item is None:
                continue
            self._offered, self._served = (level, tenant, entry[2]), False
            yield item[0]
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

    def _stream(self, tenant: str, level: int, now: datetime) -> Iterator[_Entry] | None:
        """The tenant's demands whose effective level is `level`: oldest first in each of its named queues, the
        queues taken in turn (the one served longest ago first)."""
        streams = [s for name in self._queue_ring.get(tenant, {})
                   if (s := self._queue_stream(tenant, name, level, now)) is not None]
        if len(streams) <= 1:
            return streams[0] if streams else None
        return _in_turn(streams)

    def _queue_stream(self, tenant: str, name: str, level: int, now: datetime) -> Iterator[_Entry] | None:
        """One named queue's demands whose effective level is `level`, oldest first."""
        segments = []
        for rank in range(level, LEVELS):
            queue = self._queues.get((tenant, name, rank))
            if not queue:
                continue
            promoted = rank - level
            # Waiting in [promoted, promoted + 1) ageing periods puts a demand of `rank` at `level`.
            lo = 0 if level == 0 else _upto(queue, now - self._ageing * (promoted + 1))
            hi = len(queue) if promoted == 0 else _upto(queue, now - self._ageing * promoted)
            if lo < hi:
                segments.append(queue[lo:hi])
        if not segments:
            return None
        return iter(segments[0]) if len(segments) == 1 else heapq.merge(*segments)

    def _weight(self, tenant: str) -> float:
        policy = self._policies.get(tenant)
        return 1.0 if policy is None else policy.weight

    def quota_block(self, demand: Demand) -> str | None:
        """None if placing the demand keeps its named queue and its tenant within their quotas, else why not (the
        queue's quota is named first when both are reached: it is the narrower one)."""
        policy = self._policies.get(demand.tenant)
        if policy is None:
            return None
        need = _amounts(demand)
        quota = policy.queues.get(demand.queue)
        if quota is not None:
            used = self._queue_usage.get((demand.tenant, demand.queue), (0, 0, 0))
            if (over := _over(quota, used, need)) is not None:
                return f"quota: queue {demand.tenant}/{demand.queue} at {over}"
        if (over := _over(policy, self._usage.get(demand.tenant, (0, 0, 0)), need)) is not None:
            return f"quota: tenant {demand.tenant} at {over}"
        return None

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
            ring = self._queue_ring.get(tenant)
            if ring is not None and demand.queue in ring:
                # This queue was served: the tenant's next pass starts with its other queues.
                del ring[demand.queue]
                ring[demand.queue] = None
            self._served = True
        if demand.run_id in self._charged:
            return
        amounts = _amounts(demand)
        self._charged[demand.run_id] = (demand.tenant, demand.queue, amounts)
        _add(self._usage, demand.tenant, amounts, 1)
        _add(self._queue_usage, (demand.tenant, demand.queue), amounts, 1)

    def refund(self, demand: Demand) -> None:
        """Give back what charge() counted for this run (finished, cancelled, lost), to its tenant and its queue."""
        charged = self._charged.pop(demand.run_id, None)
        if charged is None:
            return
        tenant, queue, amounts = charged
        _add(self._usage, tenant, amounts, -1)
        _add(self._queue_usage, (tenant, queue), amounts, -1)

    def usage(self, tenant: str) -> tuple[float, int, int]:
        """The tenant's charged cpu, memory in MB and GPUs."""
        mcpu, mem, gpus = self._usage.get(tenant, (0, 0, 0))
        return mcpu / 1000, mem, gpus

    def queue_usage(self, tenant: str, queue: str) -> tuple[float, int, int]:
        """What the tenant's runs of one named queue hold: cpu, memory in MB and GPUs."""
        mcpu, mem, gpus = self._queue_usage.get((tenant, queue), (0, 0, 0))
        return mcpu / 1000, mem, gpus


QUOTA_MAX = 10**9
"""The largest quota a field may hold (as the tenant's own quotas)."""


def validate_queue_quotas(queues: dict[str, QueueQuota]) -> None:
    """Refuse a queue name a job could not be filed under, and a quota that is negative, not finite or absurd,
    naming the field (`queues.batch.max_cpu`) and the value."""
    for name, quota in queues.items():
        if not QUEUE_RE.fullmatch(name):
            raise InvalidSpec("queues", name, "a queue name must be 1-63 letters, digits, '-' or '_'")
        for field in ("max_cpu", "max_memory_mb", "max_gpus"):
            value = getattr(quota, field)
            if value is not None and not (math.isfinite(value) and 0 <= value <= QUOTA_MAX):
                raise InvalidSpec(f"queues.{name}.{field}", value, f"must be a number >= 0 and <= {QUOTA_MAX}")


def _in_turn(streams: list[Iterator[_Entry]]) -> Iterator[_Entry]:
    """One from each stream in turn, dropping those that run out."""
    live = list(streams)
    while live:
        for stream in list(live):
            entry = next(stream, None)
            if entry is None:
                live.remove(stream)
            else:
                yield entry


def _upto(queue: list[_Entry], at: datetime) -> int:
    """How many entries were enqueued at or before `at`."""
    return bisect_right(queue, (at, _LAST, ""))


def _over(quota: TenantPolicy | QueueQuota, used: tuple[int, int, int], need: tuple[int, int, int]) -> str | None:
    """`8/8 cpu (this run needs 1)` for the first of the quota's limits the demand would pass, else None."""
    limits = (
        (None if quota.max_cpu is None else to_mcpu(quota.max_cpu), 1000, "cpu"),
        (quota.max_memory_mb, 1, "MB memory"),
        (quota.max_gpus, 1, "gpus"),
    )
    for (limit, scale, unit), u, n in zip(limits, used, need, strict=True):
        if limit is not None and u + n > limit:
            return f"{_num(u / scale)}/{_num(limit / scale)} {unit} (this run needs {_num(n / scale)})"
    return None


def _add(usage: dict[_K, tuple[int, int, int]], key: _K, amounts: tuple[int, int, int], sign: int) -> None:
    """Add (sign 1) or take back (sign -1) a run's amounts; a key back at nothing leaves the books."""
    used = usage.get(key, (0, 0, 0))
    total = (used[0] + sign * amounts[0], used[1] + sign * amounts[1], used[2] + sign * amounts[2])
    if total == (0, 0, 0):
        usage.pop(key, None)
    else:
        usage[key] = total


def _amounts(d: Demand) -> tuple[int, int, int]:
    res = d.resources
    return to_mcpu(res.cpu) * res.hosts, res.memory_mb * res.hosts, res.gpus * res.hosts


def _num(x: float) -> str:
    return f"{x:.3f}".rstrip("0").rstrip(".")

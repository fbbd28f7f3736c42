"""What waits for placement, by tenant, named queue and priority, oldest first: the fair queue's index."""

from __future__ import annotations

import heapq
import itertools
from bisect import bisect_right, insort
from collections.abc import Iterator
from datetime import datetime, timedelta

from jetcron.core.placing.demand import Demand

LEVELS = 4
_LAST = 1 << 62  # sorts after every sequence number, so a bisect probe includes equal times

Entry = tuple[datetime, int, str]
"""A waiting demand's place: when it was queued, the order it came in, its run id."""


class WaitingDemands:
    """Every waiting demand, sorted by when it was queued within its tenant, named queue and priority."""

    def __init__(self, ageing: timedelta) -> None:
        self._ageing = ageing
        self._items: dict[str, tuple[Demand, Entry]] = {}
        self._queues: dict[tuple[str, str, int], list[Entry]] = {}
        self._per_tenant: dict[str, int] = {}
        self._per_queue: dict[tuple[str, str], int] = {}
        # Per tenant, its named queues with demands, insertion-ordered: the first has the turn inside the tenant.
        self._queue_ring: dict[str, dict[str, None]] = {}
        self._seq = itertools.count()

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, run_id: object) -> bool:
        return run_id in self._items

    def get(self, run_id: str) -> Demand | None:
        item = self._items.get(run_id)
        return None if item is None else item[0]

    def by_tenant(self) -> dict[str, int]:
        """How many demands each tenant has queued (tenants with none left out)."""
        return dict(self._per_tenant)

    def count(self, tenant: str) -> int:
        return self._per_tenant.get(tenant, 0)

    def push(self, demand: Demand) -> bool:
        """Queue a demand; False, and its original place kept, when its run is queued already."""
        if demand.run_id in self._items:
            return False
        entry = (demand.enqueued_at, next(self._seq), demand.run_id)
        self._items[demand.run_id] = (demand, entry)
        insort(self._queues.setdefault((demand.tenant, demand.queue, demand.priority.rank), []), entry)
        self._per_tenant[demand.tenant] = self._per_tenant.get(demand.tenant, 0) + 1
        named = (demand.tenant, demand.queue)
        self._per_queue[named] = self._per_queue.get(named, 0) + 1
        self._queue_ring.setdefault(demand.tenant, {}).setdefault(demand.queue, None)
        return True

    def remove(self, run_id: str) -> Demand | None:
        """Drop a demand; the one dropped, None for an unknown id."""
        item = self._items.pop(run_id, None)
        if item is None:
            return None
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
            del self._per_tenant[demand.tenant]
        return demand

    def served(self, tenant: str, queue: str) -> None:
        """One of the tenant's named queues was served: its next pass starts with its other queues."""
        ring = self._queue_ring.get(tenant)
        if ring is not None and queue in ring:
            del ring[queue]
            ring[queue] = None

    def level(self, demand: Demand, now: datetime) -> int:
        """Effective priority rank: one level up per ageing period waited, never above critical."""
        promoted = max(0, (now - demand.enqueued_at) // self._ageing)
        return max(0, demand.priority.rank - promoted)

    def stream(self, tenant: str, level: int, now: datetime) -> Iterator[Entry] | None:
        """The tenant's demands whose effective level is `level`: oldest first in each of its named queues, the
        queues taken in turn (the one served longest ago first)."""
        streams = [s for name in self._queue_ring.get(tenant, {})
                   if (s := self._queue_stream(tenant, name, level, now)) is not None]
        if len(streams) <= 1:
            return streams[0] if streams else None
        return _in_turn(streams)

    def _queue_stream(self, tenant: str, name: str, level: int, now: datetime) -> Iterator[Entry] | None:
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


def _in_turn(streams: list[Iterator[Entry]]) -> Iterator[Entry]:
    """One from each stream in turn, dropping those that run out."""
    live = list(streams)
    while live:
        for stream in list(live):
            entry = next(stream, None)
            if entry is None:
                live.remove(stream)
            else:
                yield entry


def _upto(queue: list[Entry], at: datetime) -> int:
    """How many entries were enqueued at or before `at`."""
    return bisect_right(queue, (at, _LAST, ""))

"""The trigger's warm index: per shard, jobs ordered by next wake time; lazy deletion on change."""

from __future__ import annotations

import builtins
import heapq
from datetime import datetime

from jetcron.core.ids import shard_of


class DueIndex:
    """Which jobs need planning by when, per shard, without scanning every job."""

    def __init__(self, shards: int) -> None:
        self.shards = shards
        self._heaps: list[list[tuple[datetime, int, str]]] = [[] for _ in range(shards)]
        self._wake: dict[str, tuple[datetime, int]] = {}
        self._seq = 0

    def __len__(self) -> int:
        return len(self._wake)

    def shard(self, job: str) -> int:
        return shard_of(job, self.shards)

    def set(self, job: str, wake: datetime | None) -> None:
        """Schedule `job` to be planned at `wake` (None: never); replaces any earlier entry."""
        if wake is None:
            self._wake.pop(job, None)
            return
        self._seq += 1
        self._wake[job] = (wake, self._seq)
        heapq.heappush(self._heaps[self.shard(job)], (wake, self._seq, job))

    def remove(self, job: str) -> None:
        self._wake.pop(job, None)

    def wake_of(self, job: str) -> datetime | None:
        entry = self._wake.get(job)
        return entry[0] if entry else None

    def pop_due(self, shard: int, until: datetime, limit: int = 10_000) -> list[str]:
        """Jobs of `shard` whose wake time is <= until, each once, removed from the index."""
        heap = self._heaps[shard]
        out: list[str] = []
        while heap and heap[0][0] <= until and len(out) < limit:
            wake, seq, job = heapq.heappop(heap)
            if self._wake.get(job) == (wake, seq):
                del self._wake[job]
                out.append(job)
        return out

    def next_wake(self, shards: builtins.set[int]) -> datetime | None:
        best: datetime | None = None
        for shard in shards:
            heap = self._heaps[shard]
            while heap and self._wake.get(heap[0][2]) != (heap[0][0], heap[0][1]):
                heapq.heappop(heap)  # stale entry left by a later set()
            if heap and (best is None or heap[0][0] < best):
                best = heap[0][0]
        return best

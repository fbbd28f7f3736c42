"""Agents' free capacity, indexed by GPU model and free GPU count, each bucket sorted by free cpu."""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Callable, Iterable
from typing import NamedTuple

from jetcron.core.models import AgentInfo, Resources

# Entries sort by free cpu, then free memory, then id: a bisect finds the tightest fit.
Entry = tuple[int, int, str]
Accept = Callable[["AgentState"], bool]


def to_mcpu(cpu: float) -> int:
    """CPU is kept in integer millicores so that place-then-release always restores exactly."""
    return round(cpu * 1000)


class Used(NamedTuple):
    """Resources taken by a set of runs, kept as runs come and go (cpu in millicores: exact both ways)."""

    mcpu: int = 0
    memory_mb: int = 0
    gpus: int = 0

    @property
    def cpu(self) -> float:
        return self.mcpu / 1000

    def plus(self, res: Resources) -> Used:
        return Used(self.mcpu + to_mcpu(res.cpu), self.memory_mb + res.memory_mb, self.gpus + res.gpus)

    def minus(self, res: Resources) -> Used:
        return Used(self.mcpu - to_mcpu(res.cpu), self.memory_mb - res.memory_mb, self.gpus - res.gpus)


class AgentState:
    """One agent: what it has, what is still free, and the runs holding a share of it."""

    __slots__ = ("agent_id", "free_gpus", "free_mcpu", "free_mem", "free_slots", "gpu_ids", "indexed", "info",
                 "leaf", "runs", "suspect", "total_mcpu")

    def __init__(self, info: AgentInfo, suspect: bool) -> None:
        self.agent_id = info.agent_id
        self.info = info
        self.total_mcpu = to_mcpu(info.cpu)
        # An agent that lists no device indices numbers its GPUs 0..n-1.
        self.gpu_ids = tuple(info.gpu_indices) if info.gpu_indices else tuple(range(info.gpus))
        self.free_mcpu = self.total_mcpu
        self.free_mem = info.memory_mb
        self.free_gpus: list[int] = sorted(self.gpu_ids)
        self.free_slots = info.slots
        """Attempts it may still be given (None: the agent sets no limit)."""
        self.suspect = suspect
        self.leaf = info.labels.get("leaf")
        self.runs: set[str] = set()
        self.indexed: tuple[int, str | None, Entry] | None = None

    def entry(self) -> Entry:
        return (self.free_mcpu, self.free_mem, self.agent_id)

    def matches(self, require: dict[str, str], needs: list[str], model: str | None) -> bool:
        """Static fit: labels, capabilities and GPU model, whatever is free."""
        info = self.info
        if model is not None and info.gpu_model != model:
            return False
        if any(info.labels.get(k) != v for k, v in require.items()):
            return False
        return all(c in info.capabilities for c in needs)

    def open_for(self, gpus: int) -> bool:
        """Draining agents take nothing; suspect agents take no GPU work until cleared."""
        return not self.info.draining and (gpus == 0 or not self.suspect)

    def has_slot(self) -> bool:
        return self.free_slots is None or self.free_slots > 0

    def take_slot(self, n: int = 1) -> None:
        if self.free_slots is not None:
            self.free_slots -= n

    def fits_now(self, mcpu: int, mem: int, gpus: int) -> bool:
        return self.has_slot() and self.free_mcpu >= mcpu and self.free_mem >= mem and len(self.free_gpus) >= gpus


class FreeIndex:
    """Non-draining agents with a free slot, bucketed by (free GPUs, GPU model); each bucket a sorted list of
    entries. `full` holds the other non-draining ones: every slot taken (the reason a run waits)."""

    def __init__(self) -> None:
        self._levels: dict[int, dict[str | None, list[Entry]]] = {}
        self._level_keys: list[int] = []
        self.full: set[str] = set()

    def add(self, a: AgentState) -> None:
        if a.info.draining:
            return
        if not a.has_slot():
            self.full.add(a.agent_id)
            return
        level, model, entry = len(a.free_gpus), a.info.gpu_model, a.entry()
        buckets = self._levels.get(level)
        if buckets is None:
            buckets = self._levels[level] = {}
            insort(self._level_keys, level)
        insort(buckets.setdefault(model, []), entry)
        a.indexed = (level, model, entry)

    def any_open(self) -> bool:
        """Whether some non-draining agent has a free slot (what a single-host or a gang run needs first)."""
        return bool(self._level_keys)

    def discard(self, a: AgentState) -> None:
        self.full.discard(a.agent_id)
        if a.indexed is None:
            return
        level, model, entry = a.indexed
        a.indexed = None
        buckets = self._levels[level]
        bucket = buckets[model]
        del bucket[bisect_left(bucket, entry)]
        if not bucket:
            del buckets[model]
            if not buckets:
                del self._levels[level]
                self._level_keys.remove(level)

    def _buckets(self, level: int, model: str | None) -> Iterable[list[Entry]]:
        buckets = self._levels[level]
        if model is None:
            return buckets.values()
        bucket = buckets.get(model)
        return () if bucket is None else (bucket,)

    def best(
        self, mcpu: int, mem: int, gpus: int, model: str | None, spread: bool,
        agents: dict[str, AgentState], accept: Accept | None,
    ) -> AgentState | None:
        """The feasible agent with the least leftover (pack) or the most free (spread).

        GPU leftover ranks first, so cpu-only work lands on hosts without free GPUs and keeps
        GPU hosts whole. Spread of GPU work prefers the most free GPUs; of cpu-only work, the most
        free cpu among hosts with the fewest free GPUs.
        """
        start = bisect_left(self._level_keys, gpus)
        levels = self._level_keys[start:]
        if spread and gpus > 0:
            levels.reverse()
        for level in levels:
            found: Entry | None = None
            for bucket in self._buckets(level, model):
                hit = _scan(bucket, mcpu, mem, spread, agents, accept)
                if hit is not None and (found is None or (hit > found if spread else hit < found)):
                    found = hit
            if found is not None:
                return agents[found[2]]
        return None

    def tails(self, gpus: int, model: str | None) -> Iterable[Entry]:
        """The most-free-cpu entry of every bucket with at least `gpus` free GPUs."""
        for level in self._level_keys[bisect_left(self._level_keys, gpus):]:
            for bucket in self._buckets(level, model):
                yield bucket[-1]

    def top_level(self, model: str | None) -> tuple[int, Entry] | None:
        """The most free GPUs any open agent of `model` has, with that agent's entry."""
        for level in reversed(self._level_keys):
            for bucket in self._buckets(level, model):
                return level, bucket[-1]
        return None


def _scan(
    bucket: list[Entry], mcpu: int, mem: int, spread: bool,
    agents: dict[str, AgentState], accept: Accept | None,
) -> Entry | None:
    lo = bisect_left(bucket, (mcpu, mem, ""))
    positions = range(len(bucket) - 1, lo - 1, -1) if spread else range(lo, len(bucket))
    for i in positions:
        entry = bucket[i]
        # From `lo` up every entry has enough cpu; memory still has to be checked one by one.
        if entry[1] < mem:
            continue
        if accept is None or accept(agents[entry[2]]):
            return entry
    return None

"""GPU gangs: one run on several hosts under one leaf switch, placed all or nothing."""

from __future__ import annotations

from jetcron.core.models import Resources
from jetcron.core.placing.agents_index import AgentState, to_mcpu

LEAF = "leaf"


class LeafIndex:
    """Agents grouped by leaf, with per-leaf counts of GPU-open agents by free GPU count.

    The counts let a gang skip every leaf that cannot have enough hosts with enough free GPUs
    without looking at its members, so a waiting gang costs O(leaves), not O(agents).
    """

    def __init__(self) -> None:
        self.members: dict[str, set[str]] = {}
        self._free_counts: dict[str, dict[int, int]] = {}
        self._counted: dict[str, int] = {}

    def add(self, a: AgentState) -> None:
        if a.leaf is None:
            return
        self.members.setdefault(a.leaf, set()).add(a.agent_id)
        if a.open_for(1):
            level = len(a.free_gpus)
            counts = self._free_counts.setdefault(a.leaf, {})
            counts[level] = counts.get(level, 0) + 1
            self._counted[a.agent_id] = level

    def discard(self, a: AgentState) -> None:
        if a.leaf is None:
            return
        level = self._counted.pop(a.agent_id, None)
        if level is not None:
            counts = self._free_counts[a.leaf]
            counts[level] -= 1
            if not counts[level]:
                del counts[level]

    def forget(self, a: AgentState) -> None:
        """The agent left the cluster: drop it from its leaf's members too."""
        self.discard(a)
        if a.leaf is not None:
            members = self.members[a.leaf]
            members.discard(a.agent_id)
            if not members:
                del self.members[a.leaf]
                self._free_counts.pop(a.leaf, None)

    def hosts_with(self, leaf: str, gpus: int) -> int:
        """Open, non-suspect hosts of `leaf` with at least `gpus` free GPUs."""
        return sum(n for level, n in self._free_counts.get(leaf, {}).items() if level >= gpus)

    def choose(
        self, res: Resources, require: dict[str, str], needs: list[str],
        agents: dict[str, AgentState], spread: bool,
    ) -> list[AgentState] | tuple[str | None, int]:
        """The gang's hosts, or the leaf that comes closest and how many hosts it has that fit."""
        mcpu, mem, gpus = to_mcpu(res.cpu), res.memory_mb, res.gpus
        closest: tuple[int, str | None] = (0, None)
        fitting: list[tuple[str, list[AgentState]]] = []
        for leaf in sorted(self.members):
            if require.get(LEAF, leaf) != leaf:
                continue
            if gpus > 0:
                upper = self.hosts_with(leaf, gpus)
                if upper < res.hosts:
                    closest = _closer(closest, upper, leaf)
                    continue
            hosts = (agents[i] for i in self.members[leaf])
            fit = [a for a in hosts if a.open_for(gpus) and a.fits_now(mcpu, mem, gpus)
                   and a.matches(require, needs, res.gpu_model)]
            closest = _closer(closest, len(fit), leaf)
            if len(fit) >= res.hosts:
                fitting.append((leaf, fit))
        if not fitting:
            return closest[1], closest[0]
        # Pack takes the leaf with the fewest fitting hosts, keeping roomy leaves for bigger gangs.
        pick = max if spread else min
        _, fit = pick(fitting, key=lambda lf: len(lf[1]))
        sign = -1 if spread else 1
        fit.sort(key=lambda a: (sign * len(a.free_gpus), sign * a.free_mcpu, sign * a.free_mem, a.agent_id))
        return fit[: res.hosts]

    def never_reason(
        self, res: Resources, require: dict[str, str], needs: list[str], agents: dict[str, AgentState]
    ) -> str | None:
        """Why no leaf could hold the gang even with every host idle, or None if one could."""
        mcpu, mem, gpus = to_mcpu(res.cpu), res.memory_mb, res.gpus
        best: tuple[int, str | None] = (0, None)
        for leaf in sorted(self.members):
            if require.get(LEAF, leaf) != leaf:
                continue
            able = sum(
                1 for a in (agents[i] for i in self.members[leaf])
                if a.total_mcpu >= mcpu and a.info.memory_mb >= mem and len(a.gpu_ids) >= gpus
                and a.matches(require, needs, res.gpu_model)
            )
            best = _closer(best, able, leaf)
        if best[0] >= res.hosts:
            return None
        what = f"no leaf can ever hold {res.hosts} hosts × {per_host(res, free=False)}"
        if best[1] is None:
            return f"{what} (no registered agent with a leaf label matches)"
        return f"{what} (largest: {best[1]} with {best[0]})"


def _closer(current: tuple[int, str | None], count: int, leaf: str) -> tuple[int, str | None]:
    # Leaves arrive sorted by name and only a strictly larger count wins, so reasons are stable.
    return (count, leaf) if current[1] is None or count > current[0] else current


def per_host(res: Resources, free: bool) -> str:
    """What each gang host must offer, as in "8 free GPUs" or "2 cpu and 1024 MB"."""
    adj = "free " if free else ""
    model = f"{res.gpu_model} " if res.gpu_model else ""
    if res.gpus > 0:
        return f"{res.gpus} {adj}{model}GPUs"
    return f"{res.cpu:g} {adj}cpu and {res.memory_mb} MB {adj}memory"

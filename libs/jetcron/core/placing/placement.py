"""Where a run goes: a live, indexed view of agents and reservations that places and releases runs."""

from __future__ import annotations

from typing import Literal

import msgspec

from jetcron.core.errors import InvalidSpec
from jetcron.core.placing.agents_index import Accept, AgentState, to_mcpu
from jetcron.core.placing.demand import Demand
from jetcron.core.placing.gangs import LEAF, per_host
from jetcron.core.placing.placement_books import ClusterBooks, Placement, check_resources
from jetcron.core.placing.placement_reasons import matching, never_reason, now_reason
from jetcron.core.placing.preemption import Amount, Host

__all__ = ["Cluster", "Demand", "Placement", "Strategy", "Unplaced"]

Strategy = Literal["pack", "spread"]
# A label pair that selects at most this many agents is scanned directly instead of the index.
_SMALL_POOL = 256
_NEVER_CACHE_MAX = 4096


class Unplaced(msgspec.Struct, frozen=True, kw_only=True):
    """Why a run has no place now."""

    run_id: str
    reason: str
    unsatisfiable: bool
    """No registered agent (or leaf) could ever fit it, even idle."""


class Cluster(ClusterBooks):
    """Agents, their free capacity and the reservations on them; place() never scans every agent."""

    def __init__(self, strategy: Strategy = "pack") -> None:
        if strategy not in ("pack", "spread"):
            raise InvalidSpec("strategy", strategy, "must be 'pack' or 'spread'")
        super().__init__()
        self._spread = strategy == "spread"

    def place(self, demand: Demand) -> Placement | Unplaced:
        """Reserve room for the run, or say why not; placing a run already placed returns its place."""
        held = self._reservations.get(demand.run_id)
        if held is not None:
            return held.placement
        res = demand.resources
        check_resources(res)
        if res.hosts > 1:
            chosen = self._leaves.choose(res, demand.require, demand.needs, self._agents, self._spread)
            if isinstance(chosen, list):
                return self._reserve(demand.run_id, res, chosen)
            leaf, count = chosen
            closest = "no leaf label on any agent" if leaf is None else f"closest: {leaf} with {count}"
            return self._unplaced(demand, f"no leaf with {res.hosts} hosts × {per_host(res, free=True)}"
                                  f"{matching(demand)} ({closest})")
        found = self._find(demand, to_mcpu(res.cpu))
        if found is None:
            return self._unplaced(demand, None)
        return self._reserve(demand.run_id, res, [found])

    def place_on(self, demand: Demand, agent_ids: list[str], leaf: str | None = None) -> Placement | None:
        """Reserve room for the run on these agents only (the room a preemption makes), or None: one of them for one
        host, a gang all or nothing on `leaf`."""
        held = self._reservations.get(demand.run_id)
        if held is not None:
            return held.placement
        res = demand.resources
        check_resources(res)
        if res.hosts > 1:
            require = demand.require if leaf is None else {**demand.require, LEAF: leaf}
            chosen = self._leaves.choose(res, require, demand.needs, self._agents, self._spread)
            return self._reserve(demand.run_id, res, chosen) if isinstance(chosen, list) else None
        found = self._best_in({i for i in agent_ids if i in self._agents}, demand, to_mcpu(res.cpu))
        return None if found is None else self._reserve(demand.run_id, res, [found])

    def hosts_for(self, d: Demand) -> list[Host]:
        """The registered agents the demand could ever run on (labels, capabilities, GPU model) and what is free on
        each now, as the books say (over-committed on paper: below zero): what a preemption is planned over."""
        return [Host(agent_id=a.agent_id, leaf=a.leaf, free=Amount(a.free_mcpu, a.free_mem, len(a.free_gpus)),
                     free_slots=a.free_slots, open=a.open_for(d.resources.gpus)) for a in self._candidates(d)]

    def _find(self, d: Demand, mcpu: int) -> AgentState | None:
        res = d.resources
        pool = self._pool(d.require)
        if pool is not None and len(pool) <= _SMALL_POOL:
            return self._best_in(pool, d, mcpu)
        accept: Accept | None = None
        needs_gpu = res.gpus > 0 and bool(self._suspect)
        if d.require or d.needs or needs_gpu:
            # The index already keeps out draining agents and the wrong GPU model.
            accept = lambda a: (not needs_gpu or not a.suspect) and a.matches(d.require, d.needs, None)  # noqa: E731
        return self._index.best(
            mcpu, res.memory_mb, res.gpus, res.gpu_model, self._spread, self._agents, accept
        )

    def _best_in(self, pool: set[str], d: Demand, mcpu: int) -> AgentState | None:
        res, best, best_key = d.resources, None, None
        flip = -1 if self._spread else 1
        gpu_flip = -1 if self._spread and res.gpus > 0 else 1
        for agent_id in pool:
            a = self._agents[agent_id]
            if not (a.open_for(res.gpus) and a.fits_now(mcpu, res.memory_mb, res.gpus)
                    and a.matches(d.require, d.needs, res.gpu_model)):
                continue
            key = (gpu_flip * len(a.free_gpus), flip * a.free_mcpu, flip * a.free_mem, a.agent_id)
            if best_key is None or key < best_key:
                best, best_key = a, key
        return best

    def _pool(self, require: dict[str, str]) -> set[str] | None:
        """The smallest set of agents carrying one of the required labels."""
        if not require:
            return None
        return min((self._by_label.get(pair, set()) for pair in require.items()), key=len)

    def _unplaced(self, d: Demand, now_text: str | None) -> Unplaced:
        res = d.resources
        key = (res, tuple(sorted(d.require.items())), tuple(d.needs))
        if key not in self._never:
            if len(self._never) >= _NEVER_CACHE_MAX:
                self._never.clear()
            if not self._agents:
                # An empty cluster is starting up, not proof that nothing ever fits.
                self._never[key] = None
            elif res.hosts > 1:
                self._never[key] = self._leaves.never_reason(res, d.require, d.needs, self._agents)
            else:
                self._never[key] = never_reason(d, self._candidates(d))
        never = self._never[key]
        if never is not None:
            return Unplaced(run_id=d.run_id, reason=never, unsatisfiable=True)
        if now_text is None:
            now_text = now_reason(d, *self._largest_free(d), registered=len(self._agents))
        return Unplaced(run_id=d.run_id, reason=now_text, unsatisfiable=False)

    def _candidates(self, d: Demand) -> list[AgentState]:
        """Registered agents that match the demand's labels, capabilities and model."""
        pool = self._pool(d.require)
        agents = self._agents.values() if pool is None else (self._agents[i] for i in pool)
        return [a for a in agents if a.matches(d.require, d.needs, d.resources.gpu_model)]

    def _largest_free(self, d: Demand) -> tuple[AgentState | None, int]:
        """The open matching agent with a free slot and the most free GPUs (GPU work) or cpu (other work);
        and how many open agents have every slot taken (all of them for an unconstrained run: no scan)."""
        res = d.resources
        if not d.require and not d.needs and not (res.gpus and self._suspect):
            # Unconstrained: the top of each index bucket is enough, no scan.
            full = len(self._index.full)
            if res.gpus > 0:
                top = self._index.top_level(res.gpu_model)
                return (None if top is None else self._agents[top[1][2]]), full
            tails = list(self._index.tails(0, res.gpu_model))
            return (self._agents[max(tails)[2]] if tails else None), full
        open_ = [a for a in self._candidates(d) if a.open_for(res.gpus)]
        full = sum(1 for a in open_ if not a.has_slot())
        open_ = [a for a in open_ if a.has_slot()]
        if not open_:
            return None, full
        if res.gpus > 0:
            return max(open_, key=lambda a: (len(a.free_gpus), a.free_mcpu, a.free_mem)), full
        return max(open_, key=lambda a: (a.free_mcpu, a.free_mem)), full

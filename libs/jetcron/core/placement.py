"""Where a run goes: a live, indexed view of agents and reservations that places and releases runs."""

from __future__ import annotations

import math
from typing import Literal, NamedTuple

import msgspec

from jetcron.core.agents_index import Accept, AgentState, FreeIndex, to_mcpu
from jetcron.core.demand import Demand
from jetcron.core.errors import InvalidSpec, NotFound
from jetcron.core.gangs import LEAF, LeafIndex, per_host
from jetcron.core.models import AgentInfo, Resources
from jetcron.core.placement_reasons import matching, never_reason, now_reason
from jetcron.core.preemption import Amount, Host

__all__ = ["Cluster", "Demand", "Placement", "Strategy", "Unplaced"]

Strategy = Literal["pack", "spread"]
# A label pair that selects at most this many agents is scanned directly instead of the index.
_SMALL_POOL = 256
_NEVER_CACHE_MAX = 4096


class Placement(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """Where a run was reserved: one agent, or every host of a gang."""

    run_id: str
    agents: list[str]
    gpu_indices: dict[str, list[int]]
    """Per agent, the device indices it gets (CUDA_VISIBLE_DEVICES)."""


class Unplaced(msgspec.Struct, frozen=True, kw_only=True):
    """Why a run has no place now."""

    run_id: str
    reason: str
    unsatisfiable: bool
    """No registered agent (or leaf) could ever fit it, even idle."""


class _Share(NamedTuple):
    mcpu: int
    mem: int
    gpus: tuple[int, ...]


class _Reservation(NamedTuple):
    placement: Placement
    shares: dict[str, _Share]


def _check(res: Resources) -> None:
    """A negative or NaN amount would corrupt the books, so it never reaches them."""
    if not (math.isfinite(res.cpu) and res.cpu >= 0):
        raise InvalidSpec("resources.cpu", res.cpu, "must be a finite number >= 0")
    counts = (("memory_mb", res.memory_mb, 0), ("gpus", res.gpus, 0), ("hosts", res.hosts, 1))
    for field, value, least in counts:
        if value < least:
            raise InvalidSpec(f"resources.{field}", value, f"must be >= {least}")


def _static(info: AgentInfo) -> tuple[object, ...]:
    """What decides whether a demand could ever fit; a heartbeat that changes none of it keeps caches."""
    return (info.cpu, info.memory_mb, info.gpus, info.gpu_model, tuple(info.gpu_indices), info.slots,
            tuple(sorted(info.labels.items())), tuple(sorted(info.capabilities)))


class Cluster:
    """Agents, their free capacity and the reservations on them; place() never scans every agent."""

    def __init__(self, strategy: Strategy = "pack") -> None:
        if strategy not in ("pack", "spread"):
            raise InvalidSpec("strategy", strategy, "must be 'pack' or 'spread'")
        self._spread = strategy == "spread"
        self._agents: dict[str, AgentState] = {}
        self._index = FreeIndex()
        self._leaves = LeafIndex()
        self._by_label: dict[tuple[str, str], set[str]] = {}
        self._suspect: set[str] = set()
        self._reservations: dict[str, _Reservation] = {}
        # "Could this ever fit?" answers, valid until an agent joins, leaves or changes capacity.
        self._never: dict[tuple[object, ...], str | None] = {}
        self._shape_version = 0

    def __len__(self) -> int:
        return len(self._agents)

    def upsert_agent(self, info: AgentInfo) -> None:
        """Add an agent or take its new capacity, labels and draining flag; reservations stay."""
        old = self._agents.get(info.agent_id)
        if old is not None and _static(old.info) == _static(info):
            # A heartbeat (draining may have changed): keep the books as they are. Recounting them walked every
            # run on the agent, every heartbeat: 100,000 of them on one agent in a staged herd.
            self._unhook(old)
            old.info = info
            self._hook(old)
            return
        new = AgentState(info, info.agent_id in self._suspect)
        self._never.clear()
        self._shape_version += 1
        if old is not None:
            self._unhook(old)
            for run_id in old.runs:
                share = self._reservations[run_id].shares[info.agent_id]
                new.free_mcpu -= share.mcpu
                new.free_mem -= share.mem
                new.free_gpus = [g for g in new.free_gpus if g not in share.gpus]
            new.take_slot(len(old.runs))
            new.runs = old.runs
        self._agents[info.agent_id] = new
        self._hook(new)

    def remove_agent(self, agent_id: str) -> list[str]:
        """Forget an agent; returns the runs that had a share on it, so their gangs can be torn down.

        Their reservations on other hosts stay until release(run_id).
        """
        a = self._agents.pop(agent_id, None)
        self._suspect.discard(agent_id)
        if a is None:
            return []
        self._unhook(a)
        self._never.clear()
        self._shape_version += 1
        for run_id in a.runs:
            del self._reservations[run_id].shares[agent_id]
        return sorted(a.runs)

    def mark_suspect(self, agent_id: str) -> None:
        """A host that missed heartbeats gets no GPU work until clear_suspect()."""
        self._set_suspect(agent_id, True)

    def clear_suspect(self, agent_id: str) -> None:
        self._set_suspect(agent_id, False)

    def free(self, agent_id: str) -> tuple[float, int, list[int]]:
        """Free cpu, memory in MB and GPU indices; never negative, even after a capacity shrink."""
        a = self._agents.get(agent_id)
        if a is None:
            raise NotFound("agent", agent_id)
        return max(0, a.free_mcpu) / 1000, max(0, a.free_mem), list(a.free_gpus)

    def any_slot(self) -> bool:
        """Whether any open agent has a slot free: without one, no run of any shape can be placed."""
        return self._index.any_open()

    def reservation(self, run_id: str) -> Placement | None:
        r = self._reservations.get(run_id)
        return None if r is None else r.placement

    def place(self, demand: Demand) -> Placement | Unplaced:
        """Reserve room for the run, or say why not; placing a run already placed returns its place."""
        held = self._reservations.get(demand.run_id)
        if held is not None:
            return held.placement
        res = demand.resources
        _check(res)
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
        _check(res)
        if res.hosts > 1:
            require = demand.require if leaf is None else {**demand.require, LEAF: leaf}
            chosen = self._leaves.choose(res, require, demand.needs, self._agents, self._spread)
            return self._reserve(demand.run_id, res, chosen) if isinstance(chosen, list) else None
        found = self._best_in({i for i in agent_ids if i in self._agents}, demand, to_mcpu(res.cpu))
        return None if found is None else self._reserve(demand.run_id, res, [found])

    def adopt(self, run_id: str, res: Resources, agents: list[str], gpu_indices: dict[str, list[int]]) -> bool:
        """Count a run that already holds its place (the run record says so) whether or not it fits now.

        A new leader rebuilds its books this way: the records are the truth, so an agent may end up
        over its capacity on paper and simply gets nothing more until runs end. False, and nothing
        counted, while one of the agents is not known yet (try again when it appears).
        """
        if run_id in self._reservations:
            return True
        if not agents or any(i not in self._agents for i in agents):
            return False
        _check(res)
        mcpu, shares = to_mcpu(res.cpu), {}
        for agent_id in agents:
            a = self._agents[agent_id]
            wanted = gpu_indices.get(agent_id)
            gpus = tuple(wanted) if wanted is not None else tuple(a.free_gpus[: res.gpus])
            share = _Share(mcpu, res.memory_mb, gpus)
            self._detach(a, share)
            a.free_mcpu -= share.mcpu
            a.free_mem -= share.mem
            a.free_gpus = [g for g in a.free_gpus if g not in gpus]
            a.take_slot()
            a.runs.add(run_id)
            self._attach(a, share)
            shares[agent_id] = share
        placement = Placement(run_id=run_id, agents=list(agents),
                              gpu_indices={i: list(s.gpus) for i, s in shares.items()})
        self._reservations[run_id] = _Reservation(placement, shares)
        return True

    def hosts_for(self, d: Demand) -> list[Host]:
        """The registered agents the demand could ever run on (labels, capabilities, GPU model) and what is free on
        each now, as the books say (over-committed on paper: below zero): what a preemption is planned over."""
        return [Host(agent_id=a.agent_id, leaf=a.leaf, free=Amount(a.free_mcpu, a.free_mem, len(a.free_gpus)),
                     free_slots=a.free_slots, open=a.open_for(d.resources.gpus)) for a in self._candidates(d)]

    def holdings(self, run_id: str) -> dict[str, Amount]:
        """Per agent, what a reserved run holds there (empty when it holds nothing)."""
        r = self._reservations.get(run_id)
        return {} if r is None else {agent: Amount(s.mcpu, s.mem, len(s.gpus)) for agent, s in r.shares.items()}

    def agents(self) -> list[AgentInfo]:
        """What every known agent advertises (for the capacity summary)."""
        return [a.info for a in self._agents.values()]

    @property
    def shape_version(self) -> int:
        """Moves whenever an agent joins, leaves or changes what it could ever hold."""
        return self._shape_version

    def release(self, run_id: str) -> None:
        """Give back every share of the run; releasing an unknown or released run does nothing."""
        r = self._reservations.pop(run_id, None)
        if r is None:
            return
        for agent_id, share in r.shares.items():
            a = self._agents[agent_id]
            self._detach(a, share)
            a.free_mcpu += share.mcpu
            a.free_mem += share.mem
            if share.gpus:
                # An agent re-registered with fewer GPUs does not get the vanished ones back.
                a.free_gpus = sorted(a.free_gpus + [g for g in share.gpus if g in a.gpu_ids])
            a.take_slot(-1)
            a.runs.discard(run_id)
            self._attach(a, share)

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

    def _reserve(self, run_id: str, res: Resources, hosts: list[AgentState]) -> Placement:
        mcpu, shares = to_mcpu(res.cpu), {}
        for a in hosts:
            share = _Share(mcpu, res.memory_mb, tuple(a.free_gpus[: res.gpus]))
            self._detach(a, share)
            a.free_mcpu -= share.mcpu
            a.free_mem -= share.mem
            if share.gpus:
                a.free_gpus = a.free_gpus[res.gpus:]
            a.take_slot()
            a.runs.add(run_id)
            self._attach(a, share)
            shares[a.agent_id] = share
        placement = Placement(run_id=run_id, agents=[a.agent_id for a in hosts],
                              gpu_indices={i: list(s.gpus) for i, s in shares.items()})
        self._reservations[run_id] = _Reservation(placement, shares)
        return placement

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

    def _set_suspect(self, agent_id: str, suspect: bool) -> None:
        (self._suspect.add if suspect else self._suspect.discard)(agent_id)
        a = self._agents.get(agent_id)
        if a is not None and a.suspect != suspect:
            self._leaves.discard(a)
            a.suspect = suspect
            self._leaves.add(a)

    def _hook(self, a: AgentState) -> None:
        self._index.add(a)
        self._leaves.add(a)
        for pair in a.info.labels.items():
            self._by_label.setdefault(pair, set()).add(a.agent_id)

    def _unhook(self, a: AgentState) -> None:
        self._index.discard(a)
        self._leaves.forget(a)
        for pair in a.info.labels.items():
            ids = self._by_label[pair]
            ids.discard(a.agent_id)
            if not ids:
                del self._by_label[pair]

    def _detach(self, a: AgentState, share: _Share) -> None:
        self._index.discard(a)
        if share.gpus:
            self._leaves.discard(a)

    def _attach(self, a: AgentState, share: _Share) -> None:
        self._index.add(a)
        if share.gpus:
            self._leaves.add(a)


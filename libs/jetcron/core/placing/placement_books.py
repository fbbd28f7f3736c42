"""The cluster's books: its agents with their free capacity and indexes, and the runs reserved on them."""

from __future__ import annotations

import math
from typing import NamedTuple

import msgspec

from jetcron.core.errors import InvalidSpec, NotFound
from jetcron.core.models import AgentInfo, Resources
from jetcron.core.placing.agents_index import AgentState, FreeIndex, to_mcpu
from jetcron.core.placing.gangs import LeafIndex
from jetcron.core.placing.preemption import Amount


class Placement(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """Where a run was reserved: one agent, or every host of a gang."""

    run_id: str
    agents: list[str]
    gpu_indices: dict[str, list[int]]
    """Per agent, the device indices it gets (CUDA_VISIBLE_DEVICES)."""


class _Share(NamedTuple):
    mcpu: int
    mem: int
    gpus: tuple[int, ...]


class _Reservation(NamedTuple):
    placement: Placement
    shares: dict[str, _Share]


def check_resources(res: Resources) -> None:
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


class ClusterBooks:
    """Agents, their free capacity and the reservations on them, indexed so that a place is found without a scan:
    by free capacity, by leaf, by label."""

    def __init__(self) -> None:
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
        check_resources(res)
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

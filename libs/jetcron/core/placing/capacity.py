"""A small summary of what the registered agents could ever hold, and the submit-time check that reads it.

Placement publishes the summary; the API reads it to warn at submit about a job no agent could ever
run, without reading every agent. It only drops detail (labels per agent), so the check can miss
an unsatisfiable job (placement then says so on the run) but never warns about one that fits.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

import msgspec

from jetcron.core.models import AgentInfo, Priority, Resources
from jetcron.core.placing.agents_index import AgentState
from jetcron.core.placing.gangs import LEAF, per_host
from jetcron.core.placing.placement import Demand
from jetcron.core.placing.placement_reasons import never_reason

__all__ = ["CapacitySummary", "LeafShape", "Shape", "summarize", "unsatisfiable"]

MAX_LABEL_VALUES = 1000
MAX_LEAF_SHAPES = 2000


class Shape(msgspec.Struct, frozen=True, kw_only=True):
    """One agent on the Pareto front of (cpu, memory, GPUs) for its GPU model."""

    agent_id: str
    cpu: float
    memory_mb: int
    gpus: int
    gpu_model: str | None = None


class LeafShape(msgspec.Struct, frozen=True, kw_only=True):
    """How many hosts of one size sit under one leaf switch."""

    leaf: str
    cpu: float
    memory_mb: int
    gpus: int
    gpu_model: str | None = None
    count: int


class CapacitySummary(msgspec.Struct, frozen=True, kw_only=True):
    """What the registered agents could hold if idle (draining and suspect hosts included)."""

    at: datetime
    agents: int
    largest: list[Shape] = msgspec.field(default_factory=list)
    labels: dict[str, list[str]] = msgspec.field(default_factory=dict)
    """Label values present, per key; a key with more than MAX_LABEL_VALUES values is left out (not checked)."""
    capabilities: list[str] = msgspec.field(default_factory=list)
    leaves: list[LeafShape] | None = None
    """None when there were too many to list (gangs are then not checked at submit)."""


def _front(points: list[Shape]) -> list[Shape]:
    """Agents no other agent beats on every dimension; the largest id stands for equal sizes."""
    points = sorted(points, key=lambda p: p.agent_id, reverse=True)
    points.sort(key=lambda p: (-p.cpu, -p.memory_mb, -p.gpus))  # stable: among equals the largest id first
    front: list[Shape] = []
    for p in points:
        if not any(q.cpu >= p.cpu and q.memory_mb >= p.memory_mb and q.gpus >= p.gpus for q in front):
            front.append(p)
    return front


def summarize(agents: Iterable[AgentInfo], at: datetime) -> CapacitySummary:
    """O(agents); placement recomputes it only when an agent joins, leaves or changes size."""
    by_model: dict[str | None, list[Shape]] = {}
    labels: dict[str, set[str]] = {}
    caps: set[str] = set()
    leaf_counts: dict[tuple[str, float, int, int, str | None], int] = {}
    n = 0
    for info in agents:
        n += 1
        gpus = len(info.gpu_indices) if info.gpu_indices else info.gpus
        by_model.setdefault(info.gpu_model, []).append(Shape(
            agent_id=info.agent_id, cpu=info.cpu, memory_mb=info.memory_mb, gpus=gpus, gpu_model=info.gpu_model))
        for key, value in info.labels.items():
            labels.setdefault(key, set()).add(value)
        caps.update(info.capabilities)
        leaf = info.labels.get(LEAF)
        if leaf is not None:
            k = (leaf, info.cpu, info.memory_mb, gpus, info.gpu_model)
            leaf_counts[k] = leaf_counts.get(k, 0) + 1
    largest = [p for model in sorted(by_model, key=lambda m: m or "") for p in _front(by_model[model])]
    leaves = None if len(leaf_counts) > MAX_LEAF_SHAPES else [
        LeafShape(leaf=k[0], cpu=k[1], memory_mb=k[2], gpus=k[3], gpu_model=k[4], count=c)
        for k, c in sorted(leaf_counts.items(), key=lambda kc: (kc[0][0], kc[0][1], kc[0][2], kc[0][3],
                                                                 kc[0][4] or ""))]
    return CapacitySummary(
        at=at, agents=n, largest=largest, capabilities=sorted(caps), leaves=leaves,
        labels={k: sorted(v) for k, v in sorted(labels.items()) if len(v) <= MAX_LABEL_VALUES})


def unsatisfiable(res: Resources, require: dict[str, str], needs: list[str], summary: CapacitySummary) -> str | None:
    """Why no registered agent (or leaf) could ever run this, or None when it might; never a false alarm."""
    if summary.agents == 0:
        return None  # a cluster starting up: placement decides once agents register
    for key, value in sorted(require.items()):
        if key in summary.labels and value not in summary.labels[key]:
            return f"no registered agent has label {key}={value}"
    for cap in needs:
        if cap not in summary.capabilities:
            return f"no registered agent has capability {cap}"
    if res.hosts > 1:
        return _gang_never(res, require, summary)
    candidates = [_state(p) for p in summary.largest if res.gpu_model is None or p.gpu_model == res.gpu_model]
    # Labels are not kept per agent here, so the text speaks of all agents: still true with constraints.
    demand = Demand(run_id="submit", tenant="", priority=Priority.NORMAL, resources=res, enqueued_at=summary.at)
    if not candidates:
        return f"no registered agent has GPU model {res.gpu_model}"
    return never_reason(demand, candidates)


def _gang_never(res: Resources, require: dict[str, str], summary: CapacitySummary) -> str | None:
    if summary.leaves is None:
        return None
    able: dict[str, int] = {}
    for s in summary.leaves:
        if require.get(LEAF, s.leaf) != s.leaf:
            continue
        fits = (s.cpu >= res.cpu and s.memory_mb >= res.memory_mb and s.gpus >= res.gpus
                and (res.gpu_model is None or s.gpu_model == res.gpu_model))
        able[s.leaf] = able.get(s.leaf, 0) + (s.count if fits else 0)
    best: tuple[int, str | None] = (0, None)
    for leaf in sorted(able):
        if best[1] is None or able[leaf] > best[0]:
            best = (able[leaf], leaf)
    if best[0] >= res.hosts:
        return None
    what = f"no leaf can ever hold {res.hosts} hosts × {per_host(res, free=False)}"
    if best[1] is None:
        return f"{what} (no registered agent with a leaf label matches)"
    return f"{what} (largest: {best[1]} with {best[0]})"


def _state(p: Shape) -> AgentState:
    info = AgentInfo(agent_id=p.agent_id, cpu=p.cpu, memory_mb=p.memory_mb, gpus=p.gpus, gpu_model=p.gpu_model,
                     heartbeat_at=datetime.min, started_at=datetime.min)
    return AgentState(info, suspect=False)

"""Human reasons for a run that has no place: why not now, and why not ever."""

from __future__ import annotations

from jetcron.core.placing.agents_index import AgentState, to_mcpu
from jetcron.core.placing.demand import Demand


def cpu_text(cpu: float) -> str:
    """4 -> "4.0", 0.25 -> "0.25": at least one decimal, at most three."""
    text = f"{cpu:.3f}".rstrip("0")
    return text + "0" if text.endswith(".") else text


def constraints(d: Demand, model: bool) -> list[str]:
    """Labels and capabilities as "zone=eu, docker"; the GPU model too unless the text names it."""
    parts = [f"{k}={v}" for k, v in sorted(d.require.items())] + list(d.needs)
    if model and d.resources.gpu_model:
        parts.append(f"gpu model {d.resources.gpu_model}")
    return parts


def matching(d: Demand) -> str:
    parts = constraints(d, model=d.resources.gpus == 0)
    return f" matching {', '.join(parts)}" if parts else ""


def _gpus(n: int, model: str | None, free: bool) -> str:
    adj = "free " if free else ""
    kind = f"{model} " if model else ""
    return f"{n} {adj}{kind}GPU" + ("" if n == 1 else "s")


def never_reason(d: Demand, candidates: list[AgentState]) -> str | None:
    """Why no registered agent could hold the run even idle, or None if one could.

    `candidates` are the registered agents matching the run's labels, capabilities and model,
    draining and suspect ones included: those states pass, a missing label does not.
    """
    res, parts = d.resources, constraints(d, model=True)
    if not candidates:
        return f"no registered agent matches {', '.join(parts)}"
    mcpu = to_mcpu(res.cpu)
    if any(a.total_mcpu >= mcpu and a.info.memory_mb >= res.memory_mb and len(a.gpu_ids) >= res.gpus
           for a in candidates):
        return None
    who = "no registered agent" + matching(d)
    top = max(candidates, key=lambda a: (a.total_mcpu, a.agent_id))
    if top.total_mcpu < mcpu:
        return f"{who} can ever fit {res.cpu:g} cpu (largest: {top.agent_id} with {top.info.cpu:g} cpu)"
    top = max(candidates, key=lambda a: (a.info.memory_mb, a.agent_id))
    if top.info.memory_mb < res.memory_mb:
        return (f"{who} can ever fit {res.memory_mb} MB memory "
                f"(largest: {top.agent_id} with {top.info.memory_mb} MB)")
    top = max(candidates, key=lambda a: (len(a.gpu_ids), a.agent_id))
    if len(top.gpu_ids) < res.gpus:
        return (f"{who} can ever fit {_gpus(res.gpus, res.gpu_model, False)} "
                f"(largest: {top.agent_id} with {_gpus(len(top.gpu_ids), None, False)})")
    top = max(candidates, key=lambda a: (a.total_mcpu, a.info.memory_mb, len(a.gpu_ids), a.agent_id))
    return (f"{who} can ever fit {res.cpu:g} cpu, {res.memory_mb} MB memory and "
            f"{_gpus(res.gpus, res.gpu_model, False)} on one host (largest: {top.agent_id} with "
            f"{top.info.cpu:g} cpu, {top.info.memory_mb} MB and {_gpus(len(top.gpu_ids), None, False)})")


def now_reason(d: Demand, largest: AgentState | None, full: int = 0, *, registered: int) -> str:
    """Why the run has no place right now; `largest` is the open matching agent with a free slot and the most
    free; `full`, how many open matching agents have every slot taken."""
    res = d.resources
    if largest is None and full:
        who = "agent runs as many attempts as its" if full == 1 else "agents run as many attempts as their"
        return f"no agent with a free slot{matching(d)} ({full} {who} slots allow)"
    if res.gpus > 0:
        need = (f"{cpu_text(res.cpu)} free cpu, {res.memory_mb} MB free memory and "
                f"{_gpus(res.gpus, res.gpu_model, True)}")
    else:
        need = f"{cpu_text(res.cpu)} free cpu and {res.memory_mb} MB free memory"
    head = f"no agent with {need}{matching(d)}"
    if registered == 0:
        return f"{head} (no agents registered)"
    if largest is None:
        closed = "draining or suspect" if res.gpus > 0 else "draining"
        return f"{head} (every matching agent is {closed})"
    cpu, mem = cpu_text(max(0, largest.free_mcpu) / 1000), max(0, largest.free_mem)
    if res.gpus > 0:
        gpus = _gpus(len(largest.free_gpus), None, False)
        return f"{head} (largest free: {largest.agent_id} with {gpus}, {cpu} cpu and {mem} MB)"
    return f"{head} (largest free: {largest.agent_id} with {cpu} cpu and {mem} MB)"

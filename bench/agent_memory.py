"""An agent's memory over a long life: what it holds after tens of thousands of runs, and what bounds each part.

A whole system on loopback (`bench.common.system`: api, trigger, placement, run tracker; history kept
`--keep-seconds`) and two agents this bench starts itself, simulating their runs or running each job's `true`
(`--mode`): `agent-1` with tracemalloc on (`--frames` frames per allocation), `agent-2` without, whose RSS is an
agent's as deployed. `--jobs` jobs fire every second (`bench.longlife`'s jobs), half of them pinned to each agent,
until `--runs` occurrences are due.

Every `--sample-seconds` each agent, on SIGUSR2, writes down what it holds (`_state`): its RSS, the runs it has
started, its cycle collector's counts and passes per generation, pymalloc's arenas (the untraced one: tracemalloc
hides them), and the length of each structure that holds something per run (the ended attempts, the attempts
held, nats-py's subscriptions and request map, the metrics registry's series); the traced one also its heap and a
tracemalloc snapshot. At the end each agent makes a full collection with `gc.DEBUG_SAVEALL` on (the `collected`
sample): what it finds unreachable, counted by type and, in the traced agent, by where it was allocated, is the
garbage that waited for the collector's full pass; the heap and RSS before and after say what it held.

The result says, per agent, runs started and RSS at each sample; for the traced one, the heap's growth from the
sample after warm-up (`--warmup` s after the first fire) to the last, by allocation site (traceback, the top
`--top`), in bytes per run started meanwhile, and what of it was garbage.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections import Counter
from pathlib import Path
from typing import Any

from bench.common import ROOT, System, emit, system
from bench.longlife import PERIOD_MS, _each, anchors, now_ms, spec
from jetcron.sdk.client import Client

SERVICES = ("api", "trigger", "placement", "run_tracker")
AGENTS = {"agent-1": True, "agent-2": False}
"""Each agent this bench starts, and whether it traces its allocations."""
COLLECT_FLAG = "collect"
"""A file of this name in an agent's folder makes its next SIGUSR2 sample a full collection (see `_collect`)."""
GARBAGE_SITES = 12
"""Allocation sites of the garbage kept in the traced agent's result, most objects first."""
OURS = ("attempt.Attempt", "host.executor.Execution")
"""The agent's own per-run objects, counted among the garbage whatever its commonest types."""


# ---- inside an agent process ----------------------------------------------------------------------------------


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _arenas() -> dict[str, int]:
    """pymalloc's arenas now (sys._debugmallocstats, written to the C stderr): what the small-object heap holds
    from the system, used or not."""
    with tempfile.TemporaryFile() as out:
        saved = os.dup(2)
        try:
            sys.stderr.flush()
            os.dup2(out.fileno(), 2)
            sys._debugmallocstats()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        out.seek(0)
        text = out.read().decode(errors="replace")
    found: dict[str, int] = {}
    for line in text.splitlines():
        name, _, value = line.partition("=")
        key = {"# arenas allocated current": "arenas", "# bytes in allocated blocks": "allocated_block_bytes",
               "# bytes in available blocks": "available_block_bytes",
               "# bytes lost to pool headers": "pool_header_bytes"}.get(name.strip())
        if key:
            found[key] = int(value.strip().replace(",", ""))
    return found


def _runs_started() -> int:
    from jetcron.telemetry import metrics

    return int(next(s.value for s in metrics.RUN_WAIT.collect()[0].samples if s.name.endswith("_count")))


def _structures() -> dict[str, int]:
    """The length of each per-run structure of the agent, found on the heap (the bench does not reach into the
    service's wiring to hold it)."""
    from prometheus_client import REGISTRY

    from jetcron_services.agent.service import Agent

    agent = next((o for o in gc.get_objects() if isinstance(o, Agent)), None)
    if agent is None:
        return {}
    nc: Any = getattr(agent.ctx.link, "nc", None)  # jetcron.bus.link.NatsLink's connection
    return {"ended": len(agent.ended), "attempts": len(agent.attempts), "live": len(agent.live),
            "taking": len(agent._takes), "tasks": len(agent._tasks), "waiting": len(agent.waiting),
            "handoff_tasks": len(agent.handoffs._tasks), "asyncio_tasks": len(asyncio.all_tasks()),
            "nats_subscriptions": len(getattr(nc, "_subs", {})), "nats_requests": len(getattr(nc, "_resp_map", {})),
            "metric_series": sum(len(m.samples) for m in REGISTRY.collect())}


def _state() -> dict[str, Any]:
    state: dict[str, Any] = {"at": time.time(), "rss_bytes": _rss(), "runs": _runs_started(),
                             "gc_counts": gc.get_count(), "gc_collections": [g["collections"] for g in gc.get_stats()],
                             "gc_frozen": gc.get_freeze_count(), "arenas": _arenas(), "structures": _structures()}
    if tracemalloc.is_tracing():
        state["heap_bytes"] = tracemalloc.get_traced_memory()[0]
        state["tracemalloc_own_bytes"] = tracemalloc.get_tracemalloc_memory()
    return state


def _collect() -> dict[str, Any]:
    """A full collection, as the collector's next full pass would make it: what it finds unreachable (kept by
    DEBUG_SAVEALL to be counted, then freed) and the heap and RSS it gave back."""
    before = _state()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        found = gc.collect()
    finally:
        gc.set_debug(0)
    garbage = list(gc.garbage)
    gc.garbage.clear()
    by_type = Counter(f"{type(o).__module__}.{type(o).__qualname__}" for o in garbage)
    ours = {name: by_type.get(f"jetcron_services.agent.{name}", 0) for name in OURS}
    sites: Counter[str] = Counter()
    if tracemalloc.is_tracing():
        for obj in garbage:
            where = tracemalloc.get_object_traceback(obj)
            if where is not None:
                sites[_site(where)] += 1
    del garbage
    gc.collect()
    return {"before": before, "unreachable": found, "ours": ours, "by_type": dict(by_type.most_common(20)),
            "by_site": dict(sites.most_common(GARBAGE_SITES)), "after": _state()}


def _site(where: tracemalloc.Traceback) -> str:
    """An allocation's innermost frames in jetcron's own code (or the innermost, when none is), as one line."""
    frames = [f for f in where if "jetcron" in f.filename] or list(where)[-1:]
    return " <- ".join(f"{_short(f.filename)}:{f.lineno}" for f in frames[-3:][::-1])


def _short(filename: str) -> str:
    for root in ("jetcron_services/", "jetcron/", "site-packages/", "python3."):
        if root in filename:
            return filename[filename.index(root):]
    return filename


def agent(out: Path, frames: int) -> None:
    """Run the agent service, writing its state on SIGUSR2 (SIGUSR1 is the service's own task dump)."""
    if frames:
        tracemalloc.start(frames)
    taken = iter(range(1_000_000))

    def sample(_signum: int, _frame: object) -> None:
        k = next(taken)
        flag = out / COLLECT_FLAG
        state = _collect() if flag.exists() else _state()
        if tracemalloc.is_tracing():
            snapshot = tracemalloc.take_snapshot().filter_traces([
                tracemalloc.Filter(False, tracemalloc.__file__)])
            snapshot.dump(str(out / f"snap-{k}"))
        written = out / f"state-{k}.part"
        written.write_text(json.dumps(state))
        written.rename(out / f"state-{k}.json")  # whole when the bench sees it

    signal.signal(signal.SIGUSR2, sample)
    from jetcron_services.agent.service import main
    from jetcron_services.runtime import serve

    serve("agent", main)


# ---- the bench ---------------------------------------------------------------------------------------------------


def start_agents(jc: System, frames: int, mode: str) -> dict[str, Path]:
    """The agents, each in its folder for its samples, started as `bench.common.system` starts one."""
    folders = {}
    for name, traced in AGENTS.items():
        folder = jc.base / f"{name}-memory"
        folder.mkdir()
        env = {"JETCRON_AGENT_ID": name, "JETCRON_AGENT_SIM": str(mode == "sim").lower(), "JETCRON_AGENT_SLOTS": "512",
               "JETCRON_AGENT_CPU": "1000", "JETCRON_AGENT_MEMORY_MB": "10000000",
               "JETCRON_AGENT_LABELS": f"bench={name}"}
        log = (jc.base / f"{name}.log").open("ab")
        jc.procs[name] = subprocess.Popen(
            [sys.executable, "-m", "bench.agent_memory", "--agent", str(folder), "--frames",
             str(frames if traced else 0)],
            cwd=ROOT, env=jc.env(**env), stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        folders[name] = folder
    jc.wait_ready(60)
    return folders


def sample(jc: System, folders: dict[str, Path], label: str, *, collect: bool = False) -> dict[str, dict[str, Any]]:
    """Each agent's state now (their samples taken one after the other: a traced one's snapshot takes seconds)."""
    out = {}
    for name, folder in folders.items():
        before = set(folder.glob("state-*.json"))
        if collect:
            (folder / COLLECT_FLAG).touch()
        os.kill(jc.procs[name].pid, signal.SIGUSR2)
        deadline = time.monotonic() + 300
        while not (new := set(folder.glob("state-*.json")) - before):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{name} wrote no sample")
            time.sleep(0.2)
        path = new.pop()
        (folder / COLLECT_FLAG).unlink(missing_ok=True)
        state = json.loads(path.read_text())
        state["label"], state["snapshot"] = label, str(folder / path.stem.replace("state-", "snap-"))
        out[name] = state
        now = state.get("after", state)
        print(f"[agent_memory] {label} {name}: {now['runs']} runs, RSS {now['rss_bytes'] / 2**20:.1f} MiB, "
              f"heap {now.get('heap_bytes', 0) / 2**20:.1f} MiB, gc {now['gc_collections']}, {now['structures']}",
              file=sys.stderr, flush=True)
    return out


def growth(first: dict[str, Any], last: dict[str, Any], top: int) -> list[dict[str, Any]]:
    """The traced agent's heap growth between two samples by allocation site (traceback), the largest first."""
    old = tracemalloc.Snapshot.load(first["snapshot"])
    new = tracemalloc.Snapshot.load(last["snapshot"])
    runs = max(1, last["runs"] - first["runs"])
    rows = []
    for stat in new.compare_to(old, "traceback")[:top]:
        rows.append({"site": _site(stat.traceback), "bytes_per_run": round(stat.size_diff / runs, 1),
                     "grew_bytes": stat.size_diff, "blocks_per_run": round(stat.count_diff / runs, 3)})
    return rows


async def drive(jc: System, folders: dict[str, Path], args: argparse.Namespace) -> list[dict[str, dict[str, Any]]]:
    client = await Client.connect(jc.url, timeout=60, identity=jc.identity)
    first_ms = (now_ms() // 1000 + 10 + args.jobs // 50) * 1000  # once every job is made
    jobs = anchors(args.jobs, first_ms)
    # Pinned half and half by the agents' labels: placement would pack every run onto one agent
    specs = {name: {**spec(name, anchor), "require": {"bench": list(AGENTS)[i % len(AGENTS)]}}
             for i, (name, anchor) in enumerate(jobs.items())}
    await _each(list(specs), lambda n: client.call("jobs.create", {"spec": specs[n]}))
    samples = [await asyncio.to_thread(sample, jc, folders, "start")]
    due_end = first_ms + args.runs * PERIOD_MS // args.jobs
    warm_at = first_ms + int(args.warmup * 1000)
    await asyncio.sleep(max(0.0, (warm_at - now_ms()) / 1000))
    samples.append(await asyncio.to_thread(sample, jc, folders, "warm"))
    while now_ms() < due_end:
        await asyncio.sleep(max(0.0, min(args.sample_seconds, (due_end - now_ms()) / 1000)))
        samples.append(await asyncio.to_thread(sample, jc, folders, f"t+{(now_ms() - first_ms) // 1000}s"))
    await _each(list(jobs), lambda n: client.call("jobs.pause", {"name": n}))
    await client.close()
    await asyncio.sleep(args.settle)  # the last runs end
    samples.append(await asyncio.to_thread(sample, jc, folders, "end"))
    samples.append(await asyncio.to_thread(sample, jc, folders, "collected", collect=True))
    return samples


def run(args: argparse.Namespace) -> dict[str, Any]:
    with system(sync_always=args.sync == "always", services=SERVICES,
                JETCRON_HISTORY_KEEP_SECONDS=str(args.keep_seconds), JETCRON_HISTORY_MIN_SECONDS="60") as jc:
        folders = start_agents(jc, args.frames, args.mode)
        samples = asyncio.run(drive(jc, folders, args))
        traced = next(name for name, on in AGENTS.items() if on)
        sites = growth(samples[1][traced], samples[-2][traced], args.top)
    result: dict[str, Any] = {"bench": "agent_memory", "mode": args.mode, "jobs": args.jobs, "runs_target": args.runs,
                              "sync_always": args.sync == "always", "frames": args.frames,
                              "keep_seconds": args.keep_seconds}
    for name in AGENTS:
        result[name] = {"traced": AGENTS[name], **account(samples, name)}
    result["heap_growth_by_site"] = sites
    result["what"] = ("an agent's memory over tens of thousands of runs: RSS and heap growth per run from the "
                      "warm-up to the end, what a full collection then finds unreachable (garbage that waited "
                      "for the collector's full pass) and gives back, the heap's growth by allocation site")
    return result


def account(samples: list[dict[str, dict[str, Any]]], name: str) -> dict[str, Any]:
    """One agent's figures: per run from the warm-up to the end, its series, its full collection at the end."""
    warm, end, collected = samples[1][name], samples[-2][name], samples[-1][name]
    runs = max(1, end["runs"] - warm["runs"])
    out: dict[str, Any] = {
        "runs_warm_to_end": end["runs"] - warm["runs"],
        "rss_bytes_per_run": round((end["rss_bytes"] - warm["rss_bytes"]) / runs, 1),
        "unreachable_at_end": collected["ours"],
    }
    if "heap_bytes" in end:  # tracemalloc's own memory is in the traced agent's RSS: its heap is the figure
        out["heap_bytes_per_run"] = round((end["heap_bytes"] - warm["heap_bytes"]) / runs, 1)
    out["series"] = [
        {"label": s[name]["label"], "runs": s[name]["runs"], "rss_mib": round(s[name]["rss_bytes"] / 2**20, 1),
         **({"heap_mib": round(s[name]["heap_bytes"] / 2**20, 1)} if "heap_bytes" in s[name] else {}),
         "gc_collections": s[name]["gc_collections"], "arenas": s[name]["arenas"].get("arenas"),
         "structures": s[name]["structures"]} for s in samples[:-1]]
    full = {"unreachable": collected["unreachable"], "by_type": collected["by_type"],
            "by_site": collected["by_site"]}
    for key, kind in (("rss_mib", "rss_bytes"), ("heap_mib", "heap_bytes")):
        if kind in collected["before"]:
            full[f"{key}_before_after"] = [round(collected[k][kind] / 2**20, 1) for k in ("before", "after")]
    full["arenas_before_after"] = [collected[k]["arenas"].get("arenas") for k in ("before", "after")]
    out["full_collection"] = full
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=20_000, help="occurrences due in all (half on each agent)")
    parser.add_argument("--jobs", type=int, default=100, help="jobs firing every second: the offered runs/s")
    parser.add_argument("--warmup", type=float, default=20.0, help="seconds after the first fire of the baseline")
    parser.add_argument("--sample-seconds", type=float, default=40.0)
    parser.add_argument("--settle", type=float, default=10.0, help="seconds after the jobs stop before the end")
    parser.add_argument("--keep-seconds", type=float, default=120.0, help="JETCRON_HISTORY_KEEP_SECONDS")
    parser.add_argument("--frames", type=int, default=8, help="tracemalloc frames per allocation in agent-1")
    parser.add_argument("--top", type=int, default=15, help="allocation sites in the result")
    parser.add_argument("--sync", choices=["always", "default"], default="default")
    parser.add_argument("--mode", choices=["sim", "true"], default="sim",
                        help="sim agents, or agents that run each job's `true` as a child")
    parser.add_argument("--agent", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.agent:
        agent(args.agent, args.frames)
        return
    with contextlib.suppress(KeyboardInterrupt):
        emit(run(args))


if __name__ == "__main__":
    main()

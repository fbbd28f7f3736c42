"""Scenario 1: runs/s from first submit to last `succeeded`, writes per run, and (b) real `true` vs bare spawn."""

from __future__ import annotations

import argparse
import asyncio
import time

import nats

from bench import raw_js
from bench.child_floor import contained_rate
from bench.common import emit, stored_messages, submit_now_jobs, summary, system
from jetcron.bus.connect import Identity
from jetcron.sdk.client import Client
from jetcron.wire import subjects as s

SUBMIT_CONCURRENCY = 256


async def _submit_and_wait(url: str, runs: int, command: list[str], prefix: str,
                           identity: Identity | None = None) -> tuple[float, int]:
    """Submit `runs` now-jobs through the API; seconds until every run succeeded (watched on the runs bucket)."""
    identity = identity or Identity()
    client = await Client.connect(url, timeout=60, identity=identity)
    nc = await nats.connect(url, **identity.options())
    kv = await nc.jetstream().key_value(s.BUCKET_RUNS)
    done: set[str] = set()
    finished = asyncio.Event()

    async def watch() -> None:
        watcher = await kv.watch(">")
        async for entry in watcher:
            if entry is None or entry.value is None:
                continue
            if b'"state":"succeeded"' in entry.value and entry.key.startswith(prefix):
                done.add(entry.key)
                if len(done) >= runs:
                    finished.set()
                    await watcher.stop()
                    return

    watching = asyncio.create_task(watch())
    start = time.perf_counter()
    await submit_now_jobs(client, prefix, runs, command, concurrency=SUBMIT_CONCURRENCY)
    await asyncio.wait_for(finished.wait(), timeout=max(120, runs / 20))
    elapsed = time.perf_counter() - start
    watching.cancel()
    await client.close()
    await nc.close()
    return elapsed, len(done)


async def spawn_rate(n: int = 2000, concurrency: int = 8) -> float:
    """The machine's bare rate of spawning `true` from asyncio, 8 at a time: the ceiling of real no-op runs
    (docs/decisions-testing.md)."""
    gate = asyncio.Semaphore(concurrency)

    async def one() -> None:
        async with gate:
            proc = await asyncio.create_subprocess_exec("true")
            await proc.wait()

    start = time.perf_counter()
    await asyncio.gather(*(one() for _ in range(n)))
    return n / (time.perf_counter() - start)


Variant = tuple[str, str, dict[str, str]]
"""(result name, the setting's value, the settings the system runs with)."""

LEVERS = {"report_by": ("JETCRON_REPORT_BY", "report", ("direct", "stream")),
          "report_batch": ("JETCRON_AGENT_REPORT_BATCH", "report_batch", ("32", "1"))}
"""Each setting of the protocol an operator may choose, compared: its setting, the name its comparisons' results
take, its values (default first)."""


def variants(mode: str, chosen: dict[str, list[str]]) -> list[Variant]:
    """The systems to compare: one lever's settings at a time, the others at their first chosen setting (a lever
    not chosen: its default). The defaults alone keep the name their results always had."""
    varied = [lever for lever, values in chosen.items() if len(values) > 1]
    if len(varied) > 1:
        raise ValueError(f"compare one lever at a time, not {' and '.join(varied)}")
    base = {setting: chosen.get(lever, values)[0] for lever, (setting, _, values) in LEVERS.items()}
    if not varied:
        return [(f"throughput_{mode}", "", base)]
    setting, prefix, _ = LEVERS[varied[0]]
    return [(f"{prefix}_{mode}_{by}", by, {**base, setting: by}) for by in chosen[varied[0]]]


def run(mode: str, runs: int, reps: int, sync_always: bool, compared: list[Variant]) -> list[dict[str, object]]:
    """One result per system compared; with several, each repetition runs them one after the other, so that the
    machine's busy spells fall on each alike."""
    sim = mode == "sim"
    agents = 2 if sim else 4
    rates: dict[str, list[float]] = {name: [] for name, _, _ in compared}
    writes: dict[str, list[float]] = {name: [] for name, _, _ in compared}
    raws: dict[str, list[dict[str, float]]] = {name: [] for name, _, _ in compared}
    for rep in range(reps):
        for name, _, env in compared:
            with system(sync_always=sync_always, agents=agents, sim=sim, **env) as jc:
                raws[name].append(asyncio.run(raw_js.measure(jc.url)))
                before = stored_messages(jc.server.monitor_url)
                elapsed, done = asyncio.run(_submit_and_wait(jc.url, runs, ["true"], f"b{rep}x"))
                after = stored_messages(jc.server.monitor_url)
                rates[name].append(done / elapsed)
                writes[name].append((after - before) / max(1, done))
    spawns = [asyncio.run(spawn_rate()) for _ in range(reps)] if not sim else []
    children = [asyncio.run(contained_rate()) for _ in range(reps)] if not sim else []
    results: list[dict[str, object]] = []
    for name, _, env in compared:
        result: dict[str, object] = {
            "bench": name, **{lever: env[setting] for lever, (setting, _, _) in LEVERS.items()},
            "runs": runs, "sync_always": sync_always, "agents": agents,
            "runs_per_s": summary(rates[name]), "writes_per_run": summary(writes[name]), **raw_js.fields(raws[name]),
        }
        result["ratio_to_raw_publish"] = summary([r / raw["publish_ack_per_s"]
                                                  for r, raw in zip(rates[name], raws[name], strict=True)])
        if spawns:
            result["bare_spawn_per_s"] = summary(spawns)
            result["ratio_to_bare_spawn"] = summary([r / sp for r, sp in zip(rates[name], spawns, strict=True)])
        if children and None not in children:  # the child floor, where this host gives children their view
            floors = [c for c in children if c is not None]
            result["contained_spawn_per_s"] = summary(floors)
            result["ratio_to_contained_spawn"] = summary([r / c for r, c in zip(rates[name], floors, strict=True)])
        results.append(result)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mode", choices=["sim", "true"], default="sim")
    parser.add_argument("--runs", type=int, default=20_000)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--sync", choices=["always", "default", "both"], default="both")
    for lever, (setting, _, values) in LEVERS.items():
        parser.add_argument(f"--{lever.replace('_', '-')}", default=values[0],
                            help=f"settings to compare, comma-separated: {', '.join(values)} ({setting})")
    args = parser.parse_args()
    chosen = {lever: getattr(args, lever).split(",") for lever in LEVERS}
    for lever, values in chosen.items():
        if unknown := sorted(set(values) - set(LEVERS[lever][2])):
            parser.error(f"--{lever.replace('_', '-')}: unknown setting {', '.join(unknown)} "
                         f"({', '.join(LEVERS[lever][2])})")
    try:
        compared = variants(args.mode, chosen)
    except ValueError as exc:
        parser.error(str(exc))
    for sync in ([True, False] if args.sync == "both" else [args.sync == "always"]):
        for result in run(args.mode, args.runs, args.reps, sync, compared):
            emit(result)


if __name__ == "__main__":
    main()

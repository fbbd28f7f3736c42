"""Scenario 1: runs/s from first submit to last `succeeded`, writes per run, and (b) real `true` vs bare spawn."""

from __future__ import annotations

import argparse
import asyncio
import time

import nats

from bench import raw_js
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


def run(mode: str, runs: int, reps: int, sync_always: bool, place_by: list[str]) -> list[dict[str, object]]:
    """One result per hand-off setting (JETCRON_PLACE_BY); with several, each repetition runs them one after the
    other, so that the machine's busy spells fall on both alike."""
    sim = mode == "sim"
    agents = 2 if sim else 4
    rates: dict[str, list[float]] = {p: [] for p in place_by}
    writes: dict[str, list[float]] = {p: [] for p in place_by}
    raws: dict[str, list[dict[str, float]]] = {p: [] for p in place_by}
    for rep in range(reps):
        for by in place_by:
            with system(sync_always=sync_always, agents=agents, sim=sim, JETCRON_PLACE_BY=by) as jc:
                raws[by].append(asyncio.run(raw_js.measure(jc.url)))
                before = stored_messages(jc.server.monitor_url)
                elapsed, done = asyncio.run(_submit_and_wait(jc.url, runs, ["true"], f"b{rep}x"))
                after = stored_messages(jc.server.monitor_url)
                rates[by].append(done / elapsed)
                writes[by].append((after - before) / max(1, done))
    spawns = [asyncio.run(spawn_rate()) for _ in range(reps)] if not sim else []
    results: list[dict[str, object]] = []
    for by in place_by:
        result: dict[str, object] = {
            # the default hand-off alone keeps the name its results always had; a comparison is named apart
            "bench": f"throughput_{mode}" if place_by == ["record"] else f"handoff_{mode}_{by}", "place_by": by,
            "runs": runs, "sync_always": sync_always, "agents": agents,
            "runs_per_s": summary(rates[by]), "writes_per_run": summary(writes[by]), **raw_js.fields(raws[by]),
        }
        result["ratio_to_raw_publish"] = summary([r / raw["publish_ack_per_s"]
                                                  for r, raw in zip(rates[by], raws[by], strict=True)])
        if spawns:
            result["bare_spawn_per_s"] = summary(spawns)
            result["ratio_to_bare_spawn"] = summary([r / sp for r, sp in zip(rates[by], spawns, strict=True)])
        results.append(result)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mode", choices=["sim", "true"], default="sim")
    parser.add_argument("--runs", type=int, default=20_000)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--sync", choices=["always", "default", "both"], default="both")
    parser.add_argument("--place-by", default="record",
                        help="hand-off settings to compare, comma-separated: record, message (JETCRON_PLACE_BY)")
    args = parser.parse_args()
    place_by = args.place_by.split(",")
    if unknown := sorted(set(place_by) - {"record", "message"}):
        parser.error(f"--place-by: unknown setting {', '.join(unknown)} (record, message)")
    for sync in ([True, False] if args.sync == "both" else [args.sync == "always"]):
        for result in run(args.mode, args.runs, args.reps, sync, place_by):
            emit(result)


if __name__ == "__main__":
    main()

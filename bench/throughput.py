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


def run(mode: str, runs: int, reps: int, sync_always: bool) -> dict[str, object]:
    sim = mode == "sim"
    agents = 2 if sim else 4
    rates, writes, raws = [], [], []
    for rep in range(reps):
        with system(sync_always=sync_always, agents=agents, sim=sim) as jc:
            raws.append(asyncio.run(raw_js.measure(jc.url)))
            before = stored_messages(jc.server.monitor_url)
            elapsed, done = asyncio.run(_submit_and_wait(jc.url, runs, ["true"], f"b{rep}x"))
            after = stored_messages(jc.server.monitor_url)
            rates.append(done / elapsed)
            writes.append((after - before) / max(1, done))
    result: dict[str, object] = {
        "bench": f"throughput_{mode}", "runs": runs, "sync_always": sync_always, "agents": agents,
        "runs_per_s": summary(rates), "writes_per_run": summary(writes), **raw_js.fields(raws),
    }
    result["ratio_to_raw_publish"] = summary([r / raw["publish_ack_per_s"] for r, raw in zip(rates, raws, strict=True)])
    if not sim:
        spawns = [asyncio.run(spawn_rate()) for _ in range(reps)]
        result["bare_spawn_per_s"] = summary(spawns)
        result["ratio_to_bare_spawn"] = summary([r / sp for r, sp in zip(rates, spawns, strict=True)])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mode", choices=["sim", "true"], default="sim")
    parser.add_argument("--runs", type=int, default=20_000)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--sync", choices=["always", "default", "both"], default="both")
    args = parser.parse_args()
    for sync in ([True, False] if args.sync == "both" else [args.sync == "always"]):
        emit(run(args.mode, args.runs, args.reps, sync))


if __name__ == "__main__":
    main()

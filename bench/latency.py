"""Scenario 1c: one run at a time on an idle system: submit -> succeeded, p50/p99 over many runs."""

from __future__ import annotations

import argparse
import asyncio
import time

import nats

from bench import raw_js
from bench.common import emit, percentile, summary, system
from jetcron.bus.connect import Identity
from jetcron.bus.kv import drop_subscription
from jetcron.sdk.client import Client
from jetcron.wire import subjects as s


async def _one_at_a_time(url: str, n: int, identity: Identity | None = None) -> list[float]:
    identity = identity or Identity()
    client = await Client.connect(url, timeout=30, identity=identity)
    nc = await nats.connect(url, **identity.options())
    kv = await nc.jetstream().key_value(s.BUCKET_RUNS)
    latencies: list[float] = []
    for i in range(n):
        watcher = await kv.watch(f"lat{i}.>", inactive_threshold=5)
        start = time.perf_counter()
        await client.call("jobs.create", {"spec": {"name": f"lat{i}", "command": ["true"],
                                                   "resources": {"cpu": 0.001, "memory_mb": 1}}})
        async for entry in watcher:
            if entry is not None and entry.value and b'"state":"succeeded"' in entry.value:
                latencies.append(time.perf_counter() - start)
                break
        await drop_subscription(nc.jetstream(), watcher._sub)
    await client.close()
    await nc.close()
    return latencies


def run(n: int, reps: int, sync_always: bool, sim: bool) -> dict[str, object]:
    p50s, p99s, raws = [], [], []
    for _ in range(reps):
        with system(sync_always=sync_always, agents=1, sim=sim) as jc:
            lat = asyncio.run(_one_at_a_time(jc.url, n))
            p50s.append(percentile(lat, 50) * 1000)
            p99s.append(percentile(lat, 99) * 1000)
            raws.append(asyncio.run(raw_js.measure(jc.url)))  # after: an idle system is what is measured
    return {"bench": "idle_single_run", "sim": sim, "sync_always": sync_always, "runs": n,
            "submit_to_succeeded_p50_ms": summary(p50s), "submit_to_succeeded_p99_ms": summary(p99s),
            **raw_js.fields(raws)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--sim", action="store_true")
    parser.add_argument("--sync", choices=["always", "default", "both"], default="both")
    args = parser.parse_args()
    for sync in (True, False):
        if args.sync == "both" or (args.sync == "always") == sync:
            emit(run(args.runs, args.reps, sync, args.sim))


if __name__ == "__main__":
    main()

"""Notification delivery latency: from a run's end (its record's finished_at) to the webhook's receipt of its
`dead` notice, p50 and p99, at idle (one failing run at a time) and in a burst of failures (N jobs created at
once, each dying at its first attempt). Real agents run `false`; auth on; `sync_interval: always`."""

from __future__ import annotations

import argparse
import asyncio
import time
from datetime import datetime

from bench.common import emit, percentile, summary, system
from bench.webhook import Receiver
from jetcron.bus.connect import Identity
from jetcron.sdk.client import Client

CONCURRENCY = 32


def _latencies(receiver: Receiver) -> list[float]:
    out = []
    for got in receiver.events("dead"):
        finished = datetime.fromisoformat(got.json()["finished_at"]).timestamp()
        out.append(got.at - finished)
    return out


async def _measure(url: str, creds: str, idle_runs: int, burst: int, rep: int) -> tuple[list[float], list[float]]:
    receiver = await Receiver().start()
    client = await Client.connect(url, timeout=30, identity=Identity(creds=creds))

    async def create(name: str) -> None:
        await client.call("jobs.create", {"spec": {
            "name": name, "command": ["false"], "retry": {"max_attempts": 1},
            "resources": {"cpu": 0.001, "memory_mb": 1},
            "notify": [{"on": ["dead"], "webhook": receiver.url()}]}})

    async def received(count: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while len(receiver.events("dead")) < count:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{len(receiver.events('dead'))} of {count} notices after {timeout} s")
            await asyncio.sleep(0.002)

    try:
        for i in range(idle_runs):
            await create(f"i{rep}x{i}")
            await received(i + 1, 30)
        idle = _latencies(receiver)
        receiver.received.clear()
        gate = asyncio.Semaphore(CONCURRENCY)

        async def one(n: int) -> None:
            async with gate:
                await create(f"b{rep}x{n}")

        await asyncio.gather(*(one(n) for n in range(burst)))
        await received(burst, 300)
        return idle, _latencies(receiver)
    finally:
        await client.close()
        await receiver.close()


def run(idle_runs: int, burst: int, reps: int) -> dict[str, object]:
    stats: dict[str, list[float]] = {k: [] for k in ("idle_p50", "idle_p99", "burst_p50", "burst_p99")}
    for rep in range(reps):
        with system(sync_always=True, agents=2, auth=True,
                    services=("api", "trigger", "placement", "run_tracker", "notifier"),
                    JETCRON_NOTIFY_ALLOW_PRIVATE="true") as jc:
            assert jc.creds is not None
            idle, burst_lat = asyncio.run(_measure(jc.url, str(jc.creds.admin), idle_runs, burst, rep))
        for name, values in (("idle", idle), ("burst", burst_lat)):
            stats[f"{name}_p50"].append(percentile(values, 50) * 1000)
            stats[f"{name}_p99"].append(percentile(values, 99) * 1000)
    result: dict[str, object] = {"bench": "notify_latency", "sync_always": True, "auth": True, "reps": reps,
                                 "idle_runs": idle_runs, "burst": burst}
    for key, values in stats.items():
        result[f"{key}_ms"] = summary(values)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--idle-runs", type=int, default=50)
    parser.add_argument("--burst", type=int, default=1000)
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    emit(run(args.idle_runs, args.burst, args.reps))


if __name__ == "__main__":
    main()

"""The REST door beside the NATS API: idle create -> succeeded latency, and create throughput (jobs stored per
second, 32 requests in flight), interleaved in each repetition so both doors see the same machine. Auth on.
HTTP requests go through bench/http_load.py (keep-alive, no client library's own cost in the figures)."""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Awaitable, Callable

import nats

from bench.common import emit, percentile, summary, system
from bench.http_load import Connection
from jetcron.bus.connect import Identity
from jetcron.bus.kv import drop_subscription
from jetcron.bus.server import free_port
from jetcron.sdk.client import Client
from jetcron.wire import subjects as s

CONCURRENCY = 32
Create = Callable[[str, bool], Awaitable[None]]


async def _measure(url: str, http_port: int, identity_creds: str, latency_runs: int,
                   throughput_jobs: int, rep: int) -> dict[str, list[float]]:
    identity = Identity(creds=identity_creds)
    client = await Client.connect(url, timeout=30, identity=identity)
    token = (await client.call("tokens.create", {"tenant": "bench"}))["token"]
    nc = await nats.connect(url, **identity.options())
    kv = await nc.jetstream().key_value(s.BUCKET_RUNS)
    tenant = Client(client.nc, 30, tenant="bench")
    auth = {"Authorization": f"Bearer {token}"}
    pool: asyncio.Queue[Connection] = asyncio.Queue()
    for _ in range(CONCURRENCY):
        pool.put_nowait(await Connection.open("127.0.0.1", http_port, auth))

    async def by_nats(name: str, now: bool) -> None:
        schedule = {"kind": "now"} if now else {"kind": "cron", "cron": "0 0 1 1 *"}
        await tenant.call("jobs.create", {"spec": {"name": name, "command": ["true"], "schedule": schedule,
                                                   "resources": {"cpu": 0.001, "memory_mb": 1}}})

    async def by_rest(name: str, now: bool) -> None:
        conn = await pool.get()
        try:
            status, text = await conn.request("POST", "/api/v1/jobs", {
                "name": name, "command": ["true"], "resources": {"cpu": 0.001, "memory_gb": 0.001},
                **({} if now else {"schedule": "0 0 1 1 *"})})
        finally:
            pool.put_nowait(conn)
        assert status == 201, text

    doors: dict[str, Create] = {"nats": by_nats, "rest": by_rest}
    out: dict[str, list[float]] = {f"{d}_{m}": [] for d in doors for m in ("latency", "rate")}
    for i in range(latency_runs):
        for door, create in doors.items():
            name = f"r{rep}{door}{i}"
            watcher = await kv.watch(f"bench.{name}.>", inactive_threshold=5)
            start = time.perf_counter()
            await create(name, True)
            async for entry in watcher:
                if entry is not None and entry.value and b'"state":"succeeded"' in entry.value:
                    out[f"{door}_latency"].append(time.perf_counter() - start)
                    break
            await drop_subscription(nc.jetstream(), watcher._sub)
    for door, create in doors.items():
        gate = asyncio.Semaphore(CONCURRENCY)

        async def one(n: int, create: Create = create, door: str = door,
                      gate: asyncio.Semaphore = gate) -> None:
            async with gate:
                await create(f"t{rep}{door}{n}", False)

        start = time.perf_counter()
        await asyncio.gather(*(one(n) for n in range(throughput_jobs)))
        out[f"{door}_rate"].append(throughput_jobs / (time.perf_counter() - start))
    while not pool.empty():
        await pool.get_nowait().close()
    await nc.close()
    await client.close()
    return out


def run(latency_runs: int, throughput_jobs: int, reps: int) -> dict[str, object]:
    p50: dict[str, list[float]] = {"nats": [], "rest": []}
    p99: dict[str, list[float]] = {"nats": [], "rest": []}
    rate: dict[str, list[float]] = {"nats": [], "rest": []}
    for rep in range(reps):
        port = free_port()
        with system(sync_always=True, agents=1, auth=True,
                    services=("api", "trigger", "placement", "run_tracker", "gateway"),
                    JETCRON_HTTP_PORT=str(port)) as jc:
            assert jc.creds is not None
            got = asyncio.run(_measure(jc.url, port, str(jc.creds.admin), latency_runs, throughput_jobs, rep))
        for door in ("nats", "rest"):
            p50[door].append(percentile(got[f"{door}_latency"], 50) * 1000)
            p99[door].append(percentile(got[f"{door}_latency"], 99) * 1000)
            rate[door].extend(got[f"{door}_rate"])
    result: dict[str, object] = {"bench": "rest_vs_nats", "sync_always": True, "auth": True, "reps": reps,
                                 "latency_runs": latency_runs, "throughput_jobs": throughput_jobs,
                                 "concurrency": CONCURRENCY}
    for door in ("nats", "rest"):
        result[f"{door}_create_to_succeeded_p50_ms"] = summary(p50[door])
        result[f"{door}_create_to_succeeded_p99_ms"] = summary(p99[door])
        result[f"{door}_creates_per_s"] = summary(rate[door])
    nats_rate = summary(rate["nats"])["median"]
    result["rest_throughput_ratio"] = round(summary(rate["rest"])["median"] / nats_rate, 3) if nats_rate else None
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--latency-runs", type=int, default=100)
    parser.add_argument("--throughput-jobs", type=int, default=2000)
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    emit(run(args.latency_runs, args.throughput_jobs, args.reps))


if __name__ == "__main__":
    main()

"""The dashboard's jobs page among many jobs: `GET /ui/jobs` (first page: 50 jobs, each with its schedule in
words, next fire time and last runs) with JOBS jobs stored, through the gateway as a logged-in tenant. The
bar: p95 at most 200 ms with 10,000 jobs (`make bench` runs that size)."""

from __future__ import annotations

import argparse
import asyncio
import time

import httpx

from bench.common import emit, percentile, summary, system
from jetcron.bus.server import free_port
from jetcron.sdk.client import Client

TENANT = "bench"
IN_FLIGHT = 64


async def _load(url: str, identity: object, jobs: int) -> tuple[float, str]:
    """JOBS cron jobs of one tenant, created through the API (the jobs page's real input), and a token for it."""
    admin = await Client.connect(url, timeout=30, identity=identity)  # type: ignore[arg-type]
    client = Client(admin.nc, 30, tenant=TENANT)
    gate = asyncio.Semaphore(IN_FLIGHT)
    start = time.perf_counter()

    async def create(i: int) -> None:
        async with gate:
            await client.jobs.create({"name": f"job-{i:05d}", "command": ["true"],
                                      "schedule": {"kind": "cron", "cron": f"{i % 60} {i % 24} * * *",
                                                   "tz": "Europe/Berlin"}})

    await asyncio.gather(*(create(i) for i in range(jobs)))
    elapsed = time.perf_counter() - start
    token = (await admin.tokens.create(tenant=TENANT)).token
    await admin.close()
    assert token is not None
    return elapsed, token


async def _measure(port: int, token: str, requests: int) -> list[float]:
    base = f"http://127.0.0.1:{port}"
    async with httpx.AsyncClient(base_url=base, timeout=30) as http:
        login = await http.post("/ui/login", data={"token": token})
        assert login.status_code == 303 and "jetcron_session" in http.cookies, login.status_code
        took: list[float] = []
        for i in range(requests + 5):
            start = time.perf_counter()
            page = await http.get("/ui/jobs")
            elapsed = time.perf_counter() - start
            assert page.status_code == 200 and page.text.count('href="/ui/jobs/job-') == 50, page.status_code
            if i >= 5:  # the first few warm the gateway's and API's caches and connections
                took.append(elapsed)
        return took


def run(jobs: int, requests: int, reps: int) -> dict[str, object]:
    p50s, p95s, loads = [], [], []
    for _ in range(reps):
        port = free_port()
        with system(sync_always=False, auth=True, services=("api", "run_tracker", "gateway"),
                    JETCRON_HTTP_PORT=str(port)) as jc:
            load, token = asyncio.run(_load(jc.url, jc.identity, jobs))
            loads.append(load)
            took = asyncio.run(_measure(port, token, requests))
        p50s.append(percentile(took, 50) * 1000)
        p95s.append(percentile(took, 95) * 1000)
    return {"bench": "dashboard_jobs_page", "jobs": jobs, "requests": requests, "reps": reps,
            "load_seconds": summary(loads), "first_page_p50_ms": summary(p50s), "first_page_p95_ms": summary(p95s),
            "bar_p95_ms": 200}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--requests", type=int, default=100)
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    emit(run(args.jobs, args.requests, args.reps))


if __name__ == "__main__":
    main()

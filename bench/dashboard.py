"""The dashboard's jobs and agents pages at the design's size: `GET /ui/jobs` (first page: 50 jobs, each with its
schedule in words, next fire time and last runs) with JOBS jobs of one tenant stored, as that tenant, and
`GET /ui/agents` (first page: 50 agents with their capacity in use) with AGENTS agents registered, as the admin;
through the gateway with logged-in sessions. The bar: p95 at most 200 ms each at 100,000 jobs and 10,000 agents
(`make bench` runs that size). The jobs are created through the API; the agents are written into the agents
bucket as their heartbeats would write them (10,000 agents do not fit this machine: docs/fleet.md)."""

from __future__ import annotations

import argparse
import asyncio
import time
from datetime import UTC, datetime

import httpx
import nats

from bench.common import System, emit, percentile, summary, system
from jetcron.auth.roles import Role
from jetcron.bus.connect import Identity
from jetcron.bus.server import free_port
from jetcron.core.models import AgentInfo
from jetcron.sdk.client import Client
from jetcron.wire import subjects as s
from jetcron.wire.codec import encode

TENANT = "bench"
IN_FLIGHT = 64


async def _register(jc: System, agents: int) -> None:
    """AGENTS agents, each writing its own entry with its own credential (the only one that may), as its heartbeat
    would; 50 at once."""
    assert jc.creds is not None, "the dashboard bench runs with auth"
    folder = jc.base / "auth" / "registered"
    folder.mkdir(parents=True, exist_ok=True)
    now, gate = datetime.now(UTC), asyncio.Semaphore(50)

    async def one(i: int) -> None:
        agent_id = f"host-{i:05d}"
        path = folder / f"{agent_id}.creds"
        assert jc.creds is not None
        jc.creds.authority.write_creds(path, Role.AGENT, agent_id=agent_id)
        info = AgentInfo(agent_id=agent_id, host=agent_id, cpu=64, memory_mb=262_144, slots=5, running=i % 6,
                         free_cpu=64 - i % 6, free_memory_mb=262_144, labels={"zone": f"z{i % 3}"},
                         heartbeat_at=now, started_at=now)
        async with gate:
            nc = await nats.connect(jc.url, **Identity(creds=str(path), tls_ca=jc.tls_ca).options())
            try:
                await nc.jetstream().publish(s.kv_subject(s.BUCKET_AGENTS, agent_id), encode(info), timeout=60)
            finally:
                await nc.close()

    await asyncio.gather(*(one(i) for i in range(agents)))


async def _load(url: str, identity: object, jobs: int) -> tuple[float, str, str]:
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
    admin_token = (await admin.tokens.create(admin=True)).token
    await admin.close()
    assert token is not None and admin_token is not None
    return elapsed, token, admin_token


async def _measure(port: int, token: str, path: str, row: str, requests: int) -> list[float]:
    """Seconds per GET of `path` in a session of `token`, each page checked to hold 50 rows (`row` 50 times)."""
    base = f"http://127.0.0.1:{port}"
    async with httpx.AsyncClient(base_url=base, timeout=30) as http:
        login = await http.post("/ui/login", data={"token": token})
        assert login.status_code == 303 and "jetcron_session" in http.cookies, login.status_code
        took: list[float] = []
        for i in range(requests + 5):
            start = time.perf_counter()
            page = await http.get(path)
            elapsed = time.perf_counter() - start
            assert page.status_code == 200 and page.text.count(row) == 50, (path, page.status_code)
            if i >= 5:  # the first few warm the gateway's and API's caches and connections
                took.append(elapsed)
        return took


def run(jobs: int, agents: int, requests: int, reps: int) -> dict[str, object]:
    found: dict[str, list[float]] = {k: [] for k in ("jobs_p50", "jobs_p95", "agents_p50", "agents_p95", "load")}
    for _ in range(reps):
        port = free_port()
        with system(sync_always=False, auth=True, services=("api", "run_tracker", "gateway"),
                    JETCRON_HTTP_PORT=str(port)) as jc:
            load, token, admin_token = asyncio.run(_load(jc.url, jc.identity, jobs))
            asyncio.run(_register(jc, agents))
            found["load"].append(load)
            took = asyncio.run(_measure(port, token, "/ui/jobs", 'href="/ui/jobs/job-', requests))
            listed = asyncio.run(_measure(port, admin_token, "/ui/agents", "<tr><td>host-", requests))
        for name, values in (("jobs", took), ("agents", listed)):
            found[f"{name}_p50"].append(percentile(values, 50) * 1000)
            found[f"{name}_p95"].append(percentile(values, 95) * 1000)
    return {"bench": "dashboard_pages", "jobs": jobs, "agents": agents, "requests": requests, "reps": reps,
            "jobs_load_seconds": summary(found["load"]),
            "jobs_page_p50_ms": summary(found["jobs_p50"]), "jobs_page_p95_ms": summary(found["jobs_p95"]),
            "agents_page_p50_ms": summary(found["agents_p50"]), "agents_page_p95_ms": summary(found["agents_p95"]),
            "bar_p95_ms": 200}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--agents", type=int, default=10_000)
    parser.add_argument("--requests", type=int, default=100)
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    emit(run(args.jobs, args.agents, args.requests, args.reps))


if __name__ == "__main__":
    main()

"""Listing runs among many: `GET /api/v1/runs?job=X&limit=50` and `?state=running&limit=50` through the REST
gateway, with JOBS x PER_JOB finished run records stored and 100 running runs (holding leases, as an agent
would); also how long a run tracker takes to build its index of active runs from them. `make bench` runs the
default, 1,000,000 records.

`--history 10,10000 --jobs 10`: the job views instead (a job, the jobs page, the dashboard's jobs page), as every
job's history grows from one size to the next: a job's latest run is one read, so they should stay flat."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import time
from datetime import UTC, datetime, timedelta

import httpx
import nats

from bench.common import emit, percentile, summary, system
from bench.http_load import Connection
from jetcron.auth.roles import Role
from jetcron.bus import lease as lease_store
from jetcron.bus.connect import Identity
from jetcron.bus.server import free_port
from jetcron.core.ids import job_key, run_id
from jetcron.core.models import JobSpec, Run, RunState
from jetcron.sdk.client import Client
from jetcron.sdk.errors import UnavailableError
from jetcron.wire import subjects as s
from jetcron.wire.codec import encode

TENANT = "bench"
AGENT = "bench-agent"
T0 = datetime(2026, 1, 1, tzinfo=UTC)
IN_FLIGHT = 2000


def _record(job: str, n: int, state: RunState) -> Run:
    at = T0 + timedelta(minutes=n)
    spec = JobSpec(name=job, command=["true"], tenant=TENANT)
    return Run(run_id=run_id(job_key(TENANT, job), at), job=job_key(TENANT, job), tenant=TENANT, state=state,
               scheduled_at=at, due_at=at, created_at=at, started_at=at, agent=AGENT, agents=[AGENT],
               finished_at=None if state is RunState.RUNNING else at, exit_code=None if state is RunState.RUNNING
               else 0, attempt=1, token=1, spec=spec)


async def _load(url: str, creds: str, agent_creds: str, jobs: int, per_job: int, running: int) -> float:
    """Write the records straight into jc_runs (the api's credential), many publishes in flight, and the running
    runs' leases as their agent (only an agent may claim a run's lease)."""
    nc = await nats.connect(url, **Identity(creds=creds).options())
    agent = await nats.connect(url, **Identity(creds=agent_creds).options())
    js = nc.jetstream(timeout=60)
    start = time.perf_counter()
    gate = asyncio.Semaphore(IN_FLIGHT)

    async def put(run: Run) -> None:
        async with gate:
            await js.publish(f"$KV.{s.BUCKET_RUNS}.{run.run_id}", encode(run))

    pending: list[asyncio.Task[None]] = []
    for j in range(jobs):
        for n in range(per_job):
            pending.append(asyncio.create_task(put(_record(f"j{j:04d}", n, RunState.SUCCEEDED))))
        if len(pending) >= 20_000:
            await asyncio.gather(*pending)
            pending.clear()
    # The backlog is written before the leases: a lease write has a short deadline of its own, which thousands
    # of record publishes still in flight can outlast.
    await asyncio.gather(*pending)
    leases = lease_store.on_server(agent.jetstream(timeout=60))
    for n in range(running):
        run = _record("live", n, RunState.RUNNING)
        await put(run)
        await leases.acquire(s.run_lease_key(run.run_id), AGENT, 3600, attempt=1)
    elapsed = time.perf_counter() - start
    await nc.close()
    await agent.close()
    return elapsed


async def _measure(port: int, token: str, requests: int, jobs: int) -> dict[str, list[float]]:
    conn = await Connection.open("127.0.0.1", port, {"Authorization": f"Bearer {token}"})
    out: dict[str, list[float]] = {"job": [], "state": []}
    for i in range(requests):
        for kind, path in (("job", f"/api/v1/runs?job=j{(i * 37) % jobs:04d}&limit=50"),
                           ("state", "/api/v1/runs?state=running&limit=50")):
            start = time.perf_counter()
            status, body = await conn.request("GET", path)
            out[kind].append(time.perf_counter() - start)
            assert status == 200 and body.count(b'"run_id"') == 50, (status, body[:300])
    await conn.close()
    return out


async def _ready_index(url: str, identity: Identity, running: int, timeout: float) -> float:
    """Seconds until the tracker's index answers with every running run."""
    client = await Client.connect(url, timeout=30, identity=identity)
    start = time.perf_counter()
    try:
        while time.perf_counter() - start < timeout:
            with contextlib.suppress(UnavailableError):  # no tracker's index ready yet
                if len((await client.runs.list(state="running", limit=1000)).items) >= running:
                    return time.perf_counter() - start
            await asyncio.sleep(0.5)
        raise TimeoutError(f"the tracker's index did not show {running} running runs in {timeout}s")
    finally:
        await client.close()


def run(jobs: int, per_job: int, running: int, requests: int, reps: int) -> dict[str, object]:
    p50: dict[str, list[float]] = {"job": [], "state": []}
    p99: dict[str, list[float]] = {"job": [], "state": []}
    loads, indexes = [], []
    for _ in range(reps):
        port = free_port()
        with system(sync_always=False, auth=True, services=("api", "gateway"), JETCRON_HTTP_PORT=str(port),
                    # 1,000,000 records are ~1.2 GB; the server reserves every limited stream's max_bytes from
                    # its 8 GB store, and the other defaults take 4.6 GB of it
                    JETCRON_RUNS_MAX_BYTES=str(3 * 1024**3)) as jc:
            assert jc.creds is not None
            agent_creds = jc.creds.path(AGENT)
            jc.creds.authority.write_creds(agent_creds, Role.AGENT, agent_id=AGENT)
            loads.append(asyncio.run(_load(jc.url, str(jc.creds.path("api")), str(agent_creds), jobs, per_job,
                                           running)))
            started = time.perf_counter()
            jc.start("run_tracker", "run_tracker")
            asyncio.run(_ready_index(jc.url, jc.identity, running, 1800))
            indexes.append(time.perf_counter() - started)

            async def token() -> str:
                client = await Client.connect(jc.url, timeout=30, identity=jc.identity)
                made = await client.tokens.create(tenant=TENANT)
                await client.close()
                assert made.token is not None
                return made.token

            got = asyncio.run(_measure(port, asyncio.run(token()), requests, jobs))
        for kind in ("job", "state"):
            p50[kind].append(percentile(got[kind], 50) * 1000)
            p99[kind].append(percentile(got[kind], 99) * 1000)
    return {"bench": "listing", "records": jobs * per_job + running, "running": running, "requests": requests,
            "reps": reps, "load_seconds": summary(loads), "tracker_index_ready_seconds": summary(indexes),
            "by_job_p50_ms": summary(p50["job"]), "by_job_p99_ms": summary(p99["job"]),
            "by_state_running_p50_ms": summary(p50["state"]), "by_state_running_p99_ms": summary(p99["state"])}


# --- a long history: the job views, with every job's history grown from one size to the next -----------------

HISTORY_VIEWS = ("job", "jobs_page", "ui_jobs")
"""`GET /api/v1/jobs/j0000` (a job and its latest run), `GET /api/v1/jobs` (every job on one page, each with its
latest run) and the dashboard's `GET /ui/jobs` (each job's last 12 runs as squares)."""


async def _grow(url: str, creds: str, jobs: int, start: int, end: int) -> float:
    """Runs start..end-1 of every job, straight into jc_runs (the api's credential), many publishes in flight."""
    nc = await nats.connect(url, **Identity(creds=creds).options())
    js = nc.jetstream(timeout=60)
    gate = asyncio.Semaphore(IN_FLIGHT)
    began = time.perf_counter()

    async def put(run: Run) -> None:
        async with gate:
            await js.publish(f"$KV.{s.BUCKET_RUNS}.{run.run_id}", encode(run))

    for first in range(start, end, 2000):
        await asyncio.gather(*(put(_record(f"j{j:04d}", n, RunState.SUCCEEDED)) for j in range(jobs)
                               for n in range(first, min(first + 2000, end))))
    elapsed = time.perf_counter() - began
    await nc.close()
    return elapsed


async def _session(port: int, token: str) -> str:
    """A dashboard session's cookie, from the login form (the cookie is a signed session, not the token)."""
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as http:
        login = await http.post("/ui/login", data={"token": token}, follow_redirects=False)
    assert login.status_code == 303 and "jetcron_session" in http.cookies, login.status_code
    return f"jetcron_session={http.cookies['jetcron_session']}"


async def _measure_views(port: int, token: str, requests: int, jobs: int) -> dict[str, list[float]]:
    conn = await Connection.open("127.0.0.1", port, {"Authorization": f"Bearer {token}",
                                                     "Cookie": await _session(port, token)})
    out: dict[str, list[float]] = {view: [] for view in HISTORY_VIEWS}
    paths = {"job": "/api/v1/jobs/j0000", "jobs_page": f"/api/v1/jobs?limit={jobs}", "ui_jobs": "/ui/jobs"}
    for i in range(requests + 3):
        for view in HISTORY_VIEWS:
            start = time.perf_counter()
            status, body = await conn.request("GET", paths[view])
            took = time.perf_counter() - start
            expected = 1 if view == "job" else jobs
            assert status == 200 and body.count(b'"run_id"' if view != "ui_jobs" else b'href="/ui/jobs/j') \
                >= expected, (view, status, body[:300])
            if i >= 3:  # the first few warm the gateway's and the API's connections
                out[view].append(took)
    await conn.close()
    return out


async def _history_jobs(url: str, identity: Identity, jobs: int) -> str:
    """The tenant's jobs (yearly: nothing fires them, and no trigger runs here), and a token for it."""
    admin = await Client.connect(url, timeout=30, identity=identity)
    client = Client(admin.nc, 30, tenant=TENANT)
    for j in range(jobs):
        await client.jobs.create({"name": f"j{j:04d}", "command": ["true"],
                                  "schedule": {"kind": "cron", "cron": "0 0 1 1 *"}})
    made = await admin.tokens.create(tenant=TENANT)
    await admin.close()
    assert made.token is not None
    return made.token


def run_history(sizes: list[int], jobs: int, requests: int, reps: int) -> dict[str, object]:
    """The job views' latency at each history size (runs per job): each should be as flat as the history is long."""
    p50: dict[str, list[float]] = {f"{view}_{size}": [] for view in HISTORY_VIEWS for size in sizes}
    p99: dict[str, list[float]] = {key: [] for key in p50}
    for _ in range(reps):
        port = free_port()
        with system(sync_always=False, auth=True, services=("api", "gateway"), JETCRON_HTTP_PORT=str(port),
                    JETCRON_RUNS_MAX_BYTES=str(3 * 1024**3)) as jc:
            assert jc.creds is not None
            token = asyncio.run(_history_jobs(jc.url, jc.identity, jobs))
            written = 0
            for size in sizes:
                asyncio.run(_grow(jc.url, str(jc.creds.path("api")), jobs, written, size))
                written = size
                got = asyncio.run(_measure_views(port, token, requests, jobs))
                for view in HISTORY_VIEWS:
                    p50[f"{view}_{size}"].append(percentile(got[view], 50) * 1000)
                    p99[f"{view}_{size}"].append(percentile(got[view], 99) * 1000)
    result: dict[str, object] = {"bench": "listing_history", "sizes": sizes, "jobs": jobs, "requests": requests,
                                 "reps": reps}
    for key in p50:
        result[f"{key}_p50_ms"] = summary(p50[key])
        result[f"{key}_p99_ms"] = summary(p99[key])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--per-job", type=int, default=1000)
    parser.add_argument("--running", type=int, default=100)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--reps", type=int, default=1)
    parser.add_argument("--history", default="",
                        help="runs per job, e.g. 10,10000: instead, the job views (REST and the dashboard's jobs page)"
                             " with every one of --jobs jobs' history grown to each size in turn")
    args = parser.parse_args()
    if args.history:
        emit(run_history([int(n) for n in args.history.split(",")], args.jobs, args.requests, args.reps))
    else:
        emit(run(args.jobs, args.per_job, args.running, args.requests, args.reps))


if __name__ == "__main__":
    main()

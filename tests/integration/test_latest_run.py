"""A job's latest run is the one whose record was written last, read in one request, on the real server: through
the SDK (runs.list with latest) and through the REST gateway's job views, per tenant."""

from __future__ import annotations

import asyncio
import json
import re
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from harness import Services

from jetcron.bus.kv import Store
from jetcron.core.ids import job_key, run_id
from jetcron.core.models import JobSpec, Run, RunState, Schedule, ScheduleKind
from jetcron.sdk.client import Client
from jetcron.sdk.errors import NotFoundError
from jetcron.wire import subjects as s

T0 = datetime(2026, 1, 1, tzinfo=UTC)
YEARLY = Schedule(kind=ScheduleKind.CRON, cron="0 0 1 1 *")
"""Jobs that no trigger fires here (none runs): their runs are written straight into the bucket."""


def _run(tenant: str, name: str, n: int, state: RunState = RunState.SUCCEEDED) -> Run:
    at = T0 + timedelta(minutes=n)
    key = job_key(tenant, name)
    return Run(run_id=run_id(key, at), job=key, tenant=tenant, state=state, scheduled_at=at, due_at=at,
               created_at=at, started_at=at, agent="agent-1", attempt=1 + n % 3,
               spec=JobSpec(name=name, command=["true"], tenant=tenant))


async def _write(runs: Store[Run], *records: Run) -> None:
    """In the order given (a record written later is a later revision), many in flight within a chunk."""
    for start in range(0, len(records), 500):
        await asyncio.gather(*(runs.put(r.run_id, r) for r in records[start:start + 500]))


async def _requests(client: Client, endpoint: str) -> int:
    """How many requests the api has answered on one of its endpoints (nats.micro's own stats)."""
    reply = await client.nc.request(f"$SRV.STATS.{s.API_SERVICE}", b"", timeout=5)
    stats: dict[str, Any] = json.loads(reply.data)
    return sum(int(e["num_requests"]) for e in stats["endpoints"] if e["name"] == endpoint)


async def test_the_latest_run_is_the_one_written_last_and_stays_in_its_tenant(services: Services,
                                                                               client: Client) -> None:
    await services.start_system(agents=0, core=["api"])
    runs = await Store.open(client.nc.jetstream(timeout=10), s.BUCKET_RUNS, Run)
    acme, globex = Client(client.nc, tenant="acme"), Client(client.nc, tenant="globex")
    default, foo = Client(client.nc, tenant="default"), Client(client.nc, tenant="foo")
    await acme.jobs.create(JobSpec(name="nightly", command=["true"], schedule=YEARLY))
    assert await acme.runs.latest("nightly") is None

    history = [_run("acme", "nightly", n) for n in range(1500)]
    await _write(runs, *history)
    assert await acme.runs.latest("nightly") == history[-1]
    again = _run("acme", "nightly", 700, RunState.RUNNING)  # an older occurrence, written last
    await _write(runs, again)
    assert await acme.runs.latest("nightly") == again
    assert await client.runs.latest("acme.nightly") == again  # the admin names it by its key

    # Another tenant's job reads like a missing one, and its runs are not found under the same name
    with pytest.raises(NotFoundError, match="nightly"):
        await globex.jobs.get("nightly")
    assert await globex.runs.latest("nightly") is None

    # The default tenant's job foo (key `foo`) and tenant foo's job bar (key `foo.bar`) do not mix
    await default.jobs.create(JobSpec(name="foo", command=["true"], schedule=YEARLY))
    await foo.jobs.create(JobSpec(name="bar", command=["true"], schedule=YEARLY))
    mine, theirs = _run("default", "foo", 1), _run("foo", "bar", 2)
    await _write(runs, mine, theirs)
    assert await default.runs.latest("foo") == mine
    assert await client.runs.latest("foo") == mine
    assert await foo.runs.latest("bar") == theirs
    assert await client.runs.latest("foo.bar") == theirs
    assert [r.run_id for r in (await default.runs.list(job="foo", newest=True)).items] == [mine.run_id]
    assert [r.job for r in (await foo.runs.list()).items] == ["foo.bar"]  # a tenant's listing: its own runs


async def test_the_gateways_job_views_show_the_run_written_last_in_one_call_each(services: Services,
                                                                                 client: Client) -> None:
    await services.start_system(agents=0, core=["api"])
    gateway = services.start("gateway", "gateway", JETCRON_HTTP_PORT="0")
    await gateway.wait_logged("gateway ready", 30)
    found = re.search(r"http://127\.0\.0\.1:(\d+)/api/v1", gateway.output())
    assert found, gateway.output()
    runs = await Store.open(client.nc.jetstream(timeout=10), s.BUCKET_RUNS, Run)
    acme = Client(client.nc, tenant="acme")
    for name in ("nightly", "hourly", "fresh"):
        await acme.jobs.create(JobSpec(name=name, command=["true"], schedule=YEARLY))
    await acme.jobs.create(JobSpec(name="other", command=["true"], schedule=YEARLY, queue="etl"))
    nightly = [_run("acme", "nightly", n) for n in range(1200)]
    failed = _run("acme", "hourly", 3, RunState.FAILED)
    await _write(runs, *nightly, _run("acme", "hourly", 5), failed, _run("acme", "other", 1))
    latest = _run("acme", "nightly", 40, RunState.RUNNING)
    await _write(runs, latest)
    token = (await client.tokens.create(tenant="acme")).token
    globex = (await client.tokens.create(tenant="globex")).token

    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{found.group(1)}",
                                 headers={"Authorization": f"Bearer {token}"}, timeout=30) as http:
        before = await _requests(client, "runs_list")
        job = (await http.get("/api/v1/jobs/nightly")).json()
        assert (job["job_id"], job["status"], job["run_id"], job["attempts"]) == \
            ("nightly", "running", latest.run_id, latest.attempt), job
        assert job["logs_url"] == f"http://127.0.0.1:{found.group(1)}/api/v1/runs/{latest.run_id}/logs"
        assert await _requests(client, "runs_list") == before + 1  # one call, however long the history

        listed = (await http.get("/api/v1/jobs", params={"queue": "default"})).json()
        shown = {j["job_id"]: (j["status"], j["run_id"]) for j in listed["items"]}
        assert shown == {"fresh": ("queued", None), "hourly": ("failed", failed.run_id),
                         "nightly": ("running", latest.run_id)}, shown
        assert await _requests(client, "runs_list") == before + 4  # one per job on the page
        failing = (await http.get("/api/v1/jobs", params={"status": "failed"})).json()
        assert [j["job_id"] for j in failing["items"]] == ["hourly"]
        assert await _requests(client, "runs_list") == before + 8  # every queue's: 4 jobs

        their = await http.get("/api/v1/jobs/nightly", headers={"Authorization": f"Bearer {globex}"})
        assert their.status_code == 404 and their.json()["code"] == "not_found", their.text

        # The dashboard's flow page colours each job by the same run, and links to it
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{found.group(1)}", timeout=30) as browser:
            # a dashboard session: the login form sets its cookie
            login = await browser.post("/ui/login", data={"token": token}, follow_redirects=False)
            assert login.status_code == 303, login.text
            flow = await browser.get("/ui/flows/nightly")
        assert flow.status_code == 200 and f'/ui/runs/{latest.run_id}"' in flow.text, flow.text[:500]
        assert await _requests(client, "runs_list") == before + 9

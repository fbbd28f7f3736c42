"""runs.list by state answers from the trackers' index of active runs (and still answers without a tracker)."""

from __future__ import annotations

import pytest
from harness import Services, wait_for

from jetcron.core.models import JobSpec, Run, RunState, Schedule, ScheduleKind
from jetcron.sdk.client import Client
from jetcron.sdk.errors import InvalidError, UnavailableError


async def test_running_runs_are_listed_per_tenant_from_the_index(services: Services, client: Client) -> None:
    await services.start_system(agents=1)
    acme, globex = Client(client.nc, tenant="acme"), Client(client.nc, tenant="globex")
    await acme.jobs.create(JobSpec(name="long", command=["sleep", "30"]))
    await globex.jobs.create(JobSpec(name="long", command=["sleep", "30"]))
    await acme.jobs.create(JobSpec(name="short", command=["true"]))

    both = await wait_for(lambda: _listed(client, "running", 2), 30, what="two running runs")
    assert sorted(r.tenant for r in both) == ["acme", "globex"]
    assert [r.job for r in (await acme.runs.list(state="running")).items] == ["acme.long"]
    assert [r.job for r in (await globex.runs.list(state="running")).items] == ["globex.long"]
    assert (await acme.runs.list(state="running", queue="other")).items == []
    # terminal states are listed by job (the key layout), with or without a tracker
    await wait_for(lambda: _succeeded(acme), 30, what="the short run to succeed")
    services["run_tracker"].stop()
    assert await _succeeded(acme)
    # without a tracker's index, a listing by active state is unavailable (retry), never a scan of every record
    with pytest.raises(UnavailableError, match="no run tracker has its index of active runs ready"):
        await acme.runs.list(state="running")


async def _listed(client: Client, state: str, count: int) -> list[Run] | None:
    """The runs listed in `state` once there are `count` of them (None before, or while no tracker's index is
    ready)."""
    try:
        page = await client.runs.list(state=state)
    except UnavailableError:
        return None
    return page.items if len(page.items) == count else None


async def _succeeded(client: Client) -> bool:
    page = await client.runs.list(job="short", state=RunState.SUCCEEDED.value)
    return len(page.items) == 1


async def test_runs_of_a_job_are_listed_newest_first_in_pages(services: Services, client: Client) -> None:
    await services.start_system(agents=0)
    acme = Client(client.nc, tenant="acme")
    await acme.jobs.create(JobSpec(name="hourly", command=["true"],
                                   schedule=Schedule(kind=ScheduleKind.CRON, cron="0 * * * *")))
    made = await acme.jobs.backfill("hourly", "2026-01-01T00:00:00Z", "2026-01-01T04:30:00Z")
    ids = sorted(r.run_id for r in made.items)
    assert len(ids) == 5

    seen: list[str] = []
    cursor: str | None = None
    while True:
        page = await acme.runs.list(job="hourly", newest=True, limit=2, cursor=cursor)
        seen.extend(r.run_id for r in page.items)
        cursor = page.next_cursor
        if cursor is None:
            break
    assert seen == ids[::-1]
    assert [r.run_id for r in (await acme.runs.list(job="hourly", limit=2)).items] == ids[:2]
    with pytest.raises(InvalidError, match="newest: must be true or false"):
        await acme.call("runs.list", {"job": "hourly", "newest": "yes"})


async def test_waiting_runs_are_listed_whole_and_filtered_by_queue(services: Services, client: Client) -> None:
    # No agent: both runs stay `scheduled`, which the trackers' index keeps without their specs
    await services.start_system(agents=0)
    acme = Client(client.nc, tenant="acme")
    await acme.jobs.create(JobSpec(name="etl", command=["echo", "etl"], queue="etl"))
    await acme.jobs.create(JobSpec(name="plain", command=["echo", "plain"]))
    both = await wait_for(lambda: _listed(acme, "scheduled", 2), 30, what="two scheduled runs")
    # Listed whole: each record as stored, its spec read back
    assert [(r.job, r.spec.command if r.spec else None) for r in both] == [
        ("acme.etl", ["echo", "etl"]), ("acme.plain", ["echo", "plain"])]
    etl = (await acme.runs.list(state="scheduled", queue="etl")).items
    assert [(r.job, r.spec.queue if r.spec else None) for r in etl] == [("acme.etl", "etl")]
    first = await acme.runs.list(state="scheduled", limit=1)
    rest = await acme.runs.list(state="scheduled", limit=1, cursor=first.next_cursor)
    assert [r.run_id for r in first.items + rest.items] == [r.run_id for r in both] and rest.next_cursor is None

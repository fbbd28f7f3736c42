"""runs.list by state answers from the trackers' index of active runs (and still answers without a tracker)."""

from __future__ import annotations

import pytest
from harness import Services, wait_for

from jetcron.core.models import JobSpec, Run, RunState
from jetcron.sdk.client import Client
from jetcron.sdk.errors import UnavailableError


async def test_running_runs_are_listed_per_tenant_from_the_index(services: Services, client: Client) -> None:
    await services.start_system(agents=1)
    acme, globex = Client(client.nc, tenant="acme"), Client(client.nc, tenant="globex")
    await acme.jobs.create(JobSpec(name="long", command=["sleep", "30"]))
    await globex.jobs.create(JobSpec(name="long", command=["sleep", "30"]))
    await acme.jobs.create(JobSpec(name="short", command=["true"]))

    async def running() -> list[Run] | None:
        try:
            page = await client.runs.list(state="running")
        except UnavailableError:  # the tracker's index not ready yet
            return None
        return page.items if len(page.items) == 2 else None

    both = await wait_for(running, 30, what="two running runs")
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


async def _succeeded(client: Client) -> bool:
    page = await client.runs.list(job="short", state=RunState.SUCCEEDED.value)
    return len(page.items) == 1

"""The typed SDK against the real API: typed arguments and results, one exception class per error code."""

from __future__ import annotations

import asyncio

import pytest
from harness import Services, wait_for

from jetcron.core.models import JobRecord, JobSpec, Run, RunState, Schedule, ScheduleKind
from jetcron.sdk.client import Client, SyncClient
from jetcron.sdk.errors import ApiError, ConflictError, InvalidError, NotFoundError
from jetcron.wire.api import Page


async def test_typed_verbs_round_trip_a_job_to_its_run(services: Services, client: Client) -> None:
    await services.start_system(agents=1)
    record = await client.jobs.create(JobSpec(name="typed", command=["sh", "-c", "echo typed"]))
    assert isinstance(record, JobRecord) and record.spec.name == "typed" and record.version == 1

    async def succeeded() -> Run | None:
        page = await client.runs.list(job="typed")
        assert isinstance(page, Page)
        return page.items[0] if page.items and page.items[0].state is RunState.SUCCEEDED else None

    run = await wait_for(succeeded, 30, what="the typed job's run")
    assert isinstance(run, Run) and run.exit_code == 0 and run.started_at is not None
    assert (await client.runs.logs(run.run_id)).output == "typed\n"
    view = await client.jobs.get("typed", count=0)
    assert view.job.version == 1 and view.next_fires == []

    # a mapping goes as given, and the API names the field that fails
    with pytest.raises(InvalidError) as invalid:
        await client.jobs.create({"name": "bad", "command": ["true"], "resources": {"cpu": -1}})
    assert (invalid.value.code, invalid.value.field) == ("invalid", "resources.cpu")
    with pytest.raises(NotFoundError):
        await client.runs.get("nope.20261203T000000000Z")
    with pytest.raises(ConflictError):
        await client.jobs.update(record.spec, expected_version=7)
    assert all(issubclass(e, ApiError) for e in (InvalidError, NotFoundError, ConflictError))


async def test_the_sync_facade_blocks_on_its_own_loop(services: Services) -> None:
    await services.start_system(agents=0)

    def use() -> tuple[JobRecord, list[str]]:
        sync = SyncClient(services.server.url)
        try:
            made = sync.jobs.create(JobSpec(name="later", command=["true"],
                                            schedule=Schedule(kind=ScheduleKind.CRON, cron="0 0 1 1 *")))
            return made, [j.spec.name for j in sync.jobs.list().items]
        finally:
            sync.close()

    made, names = await asyncio.to_thread(use)
    assert made.spec.schedule.cron == "0 0 1 1 *" and names == ["later"]

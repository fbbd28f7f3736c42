"""pause/resume/delete against a writer that lands between their read and their write (deterministic, on the
store's twin): a pause racing a delete must never bring the job back."""

from __future__ import annotations

from datetime import UTC, datetime

import msgspec
import pytest
from twin_support import twin_context

from jetcron.core.errors import NotFound
from jetcron.core.models import JobRecord, JobSpec, JobStatus, Schedule, ScheduleKind
from jetcron_services.api.admission import Admission
from jetcron_services.api.call import Call
from jetcron_services.api.jobs import Jobs

T0 = datetime(2026, 12, 1, tzinfo=UTC)


def _record(status: JobStatus = JobStatus.ACTIVE, version: int = 1) -> JobRecord:
    return JobRecord(spec=JobSpec(name="nightly", command=["true"], schedule=Schedule(kind=ScheduleKind.NOW)),
                     status=status, created_at=T0, updated_at=T0, version=version)


class Interleave:
    """Writes `other` to the job's key just before the verb's first write lands (once)."""

    def __init__(self, other: JobRecord) -> None:
        self.other = other
        self.done = False
        self.ctx = twin_context(before_write=self)

    async def __call__(self, op: str, key: str) -> None:
        if not self.done and op == "update" and key == "nightly":
            self.done = True
            await self.ctx.jobs.put(key, self.other)


def _call(name: str = "nightly") -> Call:
    return Call(msgspec.json.encode({"name": name}), None)


async def test_a_pause_that_loses_to_a_delete_fails_and_the_job_stays_deleted() -> None:
    race = Interleave(_record(JobStatus.DELETED, version=2))
    await race.ctx.jobs.create("nightly", _record())
    jobs = Jobs(race.ctx, Admission(race.ctx))
    with pytest.raises(NotFound, match=r"^job 'nightly' not found$"):
        await jobs.pause(_call())
    assert race.done
    stored, _ = await race.ctx.jobs.get("nightly")
    assert (stored.status, stored.version) == (JobStatus.DELETED, 2)


async def test_a_pause_that_loses_to_an_edit_is_decided_again_on_the_edit() -> None:
    edited = msgspec.structs.replace(_record(version=2), spec=JobSpec(
        name="nightly", command=["echo", "edited"], schedule=Schedule(kind=ScheduleKind.NOW)))
    race = Interleave(edited)
    await race.ctx.jobs.create("nightly", _record())
    paused = await Jobs(race.ctx, Admission(race.ctx)).pause(_call())
    assert race.done
    assert (paused.status, paused.version, paused.spec.command) == (JobStatus.PAUSED, 3, ["echo", "edited"])
    assert paused.paused_at is not None
    assert (await race.ctx.jobs.get("nightly"))[0] == paused


async def test_a_pause_of_a_deleted_job_names_it_and_writes_nothing() -> None:
    ctx = twin_context()
    revision = await ctx.jobs.create("nightly", _record(JobStatus.DELETED))
    with pytest.raises(NotFound, match=r"^job 'nightly' not found$"):
        await Jobs(ctx, Admission(ctx)).pause(_call())
    assert (await ctx.jobs.get("nightly"))[1] == revision

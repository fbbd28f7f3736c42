"""A `now` job is made with its end, and its shard's fire mark says it has fired: the trigger writes nothing to
the job, and a trigger started later plans no job the mark covers (jetcron.core.timing.fire_marks), on a real
nats-server. One an api of the previous release made without its end is fired and ended by the trigger."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import nats
from harness import Services, wait_for
from metrics_support import samples
from nats.js import JetStreamContext

from jetcron.bus.registry import Registry
from jetcron.core.ids import shard_of
from jetcron.core.models import JobRecord, JobSpec, Schedule, ScheduleKind
from jetcron.core.timing.fire_marks import mark_key
from jetcron.sdk.client import Client
from jetcron.wire import subjects as s
from jetcron.wire.codec import decode, encode, plain

SHARDS = 16  # the default JETCRON_TRIGGER_SHARDS
CORE = ("api", "placement", "run_tracker")


def _now(name: str) -> dict[str, Any]:
    return {"spec": {"name": name, "command": ["true"], "schedule": {"kind": "now"}}}


async def _runs(client: Client, job: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = (await client.call("runs.list", {"job": job}))["items"]
    return items


async def _succeeded_once(client: Client, job: str) -> bool:
    runs = await _runs(client, job)
    assert len(runs) <= 1, f"{job} ran {len(runs)} times"
    return bool(runs) and runs[0]["state"] == "succeeded"


class Writes:
    """Every write of a job record, as the server stores it (the bucket keeps only each job's latest), read as a
    service reads it: a record leaves out its fields at their defaults."""

    def __init__(self) -> None:
        self.seen: dict[str, list[dict[str, Any]]] = {}

    async def follow(self, nc: nats.NATS) -> None:
        async def note(msg: nats.aio.msg.Msg) -> None:
            job = msg.subject.removeprefix(f"$KV.{s.BUCKET_JOBS}.")
            self.seen.setdefault(job, []).append(plain(decode(msg.data, JobRecord)) if msg.data else {})

        await nc.subscribe(f"$KV.{s.BUCKET_JOBS}.>", cb=note)
        await nc.flush()

    def of(self, job: str) -> list[dict[str, Any]]:
        return self.seen.get(job, [])


async def _mark(js: JetStreamContext, job: str) -> int:
    kv = await js.key_value(s.BUCKET_CURSORS)
    try:
        entry = await kv.get(mark_key(shard_of(job, SHARDS)))
    except nats.js.errors.KeyNotFoundError:
        return 0
    return int(json.loads(entry.value or b"{}").get("fired_through", 0))


async def _gate_refusals(services: Services, name: str) -> float | None:
    """A trigger replica's count of occurrences its gate refused: each is a job it planned again."""
    nc = await nats.connect(services.server.url)
    try:
        mine = [i for i in await (await Registry.open(nc.jetstream())).instances() if i.pid == services[name].pid]
    finally:
        await nc.close()
    return (await samples(mine[0])).get(("jetcron_fire_gate_duplicates_total", frozenset())) if mine else None


async def _counted(services: Services, name: str) -> list[float] | None:
    found = await _gate_refusals(services, name)
    return None if found is None else [found]


async def test_a_fired_now_job_is_written_once_and_a_later_trigger_plans_it_no_more(
        services: Services, client: Client) -> None:
    # Given a system whose trigger has fired ten `now` jobs
    await services.start_system(agents=1, core=CORE)
    services.start("trigger-1", "trigger", JETCRON_AGENT_ID="trigger-1")
    nc = await nats.connect(services.server.url)
    js = nc.jetstream()
    writes = Writes()
    await writes.follow(nc)
    try:
        jobs = [f"n{i}" for i in range(10)]
        for job in jobs:
            await client.call("jobs.create", _now(job))
        for job in jobs:
            await wait_for(lambda j=job: _succeeded_once(client, j), 30, what=f"{job} to succeed")
        # Then its shard's mark comes to cover each job
        kv = await js.key_value(s.BUCKET_JOBS)
        for job in jobs:
            revision = (await kv.get(job)).revision or 0
            await wait_for(lambda j=job, r=revision: _covered(js, j, r), 10, what=f"the mark to cover {job}")
        # and each job's record was written once, by the api, with its end: the trigger wrote nothing to it
        for job in jobs:
            written = writes.of(job)
            assert len(written) == 1, f"{job} was written {len(written)} times"
            assert written[0]["fired_by_mark"] is True and written[0]["expires_at"]

        # When the trigger stops, a `now` job is made while none runs, and another trigger starts
        services["trigger-1"].stop()
        await client.call("jobs.create", _now("late"))
        services.start("trigger-2", "trigger", JETCRON_AGENT_ID="trigger-2")
        await services["trigger-2"].wait_logged("trigger ready", 30)

        # Then the new job runs once, and the new trigger planned none of the fired ones (its gate refused nothing)
        await wait_for(lambda: _succeeded_once(client, "late"), 30, what="late to succeed")
        assert await wait_for(lambda: _counted(services, "trigger-2"), 15, what="trigger-2's metrics") == [0.0]
        for job in jobs:
            assert len(await _runs(client, job)) == 1
    finally:
        await nc.close()


async def _covered(js: JetStreamContext, job: str, revision: int) -> bool:
    return await _mark(js, job) >= revision


async def test_a_now_job_changed_after_it_fired_stays_ended_and_one_changed_before_runs_once(
        services: Services, client: Client) -> None:
    # Given a `now` job that has fired, and whose shard's mark covers it
    await services.start_system(agents=1, core=CORE)
    services.start("trigger-1", "trigger", JETCRON_AGENT_ID="trigger-1")
    await client.call("jobs.create", _now("early"))
    await wait_for(lambda: _succeeded_once(client, "early"), 30, what="early to succeed")
    nc = await nats.connect(services.server.url)
    js = nc.jetstream()
    try:
        revision = (await (await js.key_value(s.BUCKET_JOBS)).get("early")).revision or 0
        await wait_for(lambda: _covered(js, "early", revision), 10, what="the mark to cover early")

        # When it is paused and resumed
        await client.call("jobs.pause", {"name": "early"})
        resumed = await client.call("jobs.resume", {"name": "early"})

        # Then it is an ordinary one-shot job that has ended, and it is not planned again: a job made after it
        # has run, and the trigger's gate refused nothing
        assert resumed["fired_by_mark"] is False and resumed["expires_at"]
        await client.call("jobs.create", _now("after"))
        await wait_for(lambda: _succeeded_once(client, "after"), 30, what="after to succeed")
        assert await _gate_refusals(services, "trigger-1") == 0.0
        assert len(await _runs(client, "early")) == 1

        # And a `now` job paused before any trigger could fire it runs once, when it is resumed
        services["trigger-1"].stop()
        await client.call("jobs.create", _now("held"))
        paused = await client.call("jobs.pause", {"name": "held"})
        assert paused["fired_by_mark"] is False and paused["expires_at"] is None
        services.start("trigger-2", "trigger", JETCRON_AGENT_ID="trigger-2")
        await services["trigger-2"].wait_logged("trigger ready", 30)
        await client.call("jobs.resume", {"name": "held"})
        await wait_for(lambda: _succeeded_once(client, "held"), 30, what="held to succeed")
        await wait_for(lambda: _ended(js, "held"), 10, what="the trigger to end held once it fired")
    finally:
        await nc.close()


async def test_a_now_job_an_api_of_the_previous_release_made_without_its_end_is_fired_once_and_ended(
        services: Services, client: Client) -> None:
    # Given the system, and a `now` job stored as an api of the previous release set to leave its end to the trigger
    # made it (JETCRON_NOW_JOB_END=fired there): no end, not marked
    await services.start_system(agents=1)
    nc = await nats.connect(services.server.url)
    writes = Writes()
    await writes.follow(nc)
    try:
        spec = JobSpec(name="classic", command=["true"], schedule=Schedule(kind=ScheduleKind.NOW))
        made = datetime.now(UTC)
        jobs = await nc.jetstream().key_value(s.BUCKET_JOBS)
        await jobs.create(spec.key, encode(JobRecord(spec=spec, created_at=made, updated_at=made)))
        # When the trigger fires it
        await wait_for(lambda: _succeeded_once(client, "classic"), 30, what="classic to succeed")
        # Then it ran once, and the trigger wrote its end once its run was recorded (no mark says it fired)
        await wait_for(lambda: len(writes.of("classic")) == 2, 10, what="classic's end")
        assert [(w["fired_by_mark"], bool(w["expires_at"])) for w in writes.of("classic")] == [(False, False),
                                                                                                (False, True)]
        # And a trigger started after it, reading the job so ended, plans it no more (its gate refused nothing)
        services["trigger-1"].stop()
        services.start("trigger-2", "trigger", JETCRON_AGENT_ID="trigger-2")
        await services["trigger-2"].wait_logged("trigger ready", 30)
        await client.call("jobs.create", _now("after"))
        await wait_for(lambda: _succeeded_once(client, "after"), 30, what="after to succeed")
        assert await wait_for(lambda: _counted(services, "trigger-2"), 15, what="trigger-2's metrics") == [0.0]
        assert len(await _runs(client, "classic")) == 1
    finally:
        await nc.close()


async def _ended(js: JetStreamContext, job: str) -> bool:
    entry = await (await js.key_value(s.BUCKET_JOBS)).get(job)
    return bool(json.loads(entry.value or b"{}").get("expires_at"))

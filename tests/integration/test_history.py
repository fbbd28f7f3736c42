"""History ages out on a real nats-server, at a short scale (seconds where a deployment keeps days): an ended run's
record, its events and output go by their own TTL, a fired one-shot job goes no later than its run (and is not
fired again by a trigger started after both are gone), count limits let the oldest runs go, and what has not
ended stays."""

from __future__ import annotations

from typing import Any

import nats
import pytest
from harness import Services, wait_for
from nats.js import JetStreamContext

from jetcron.bus.server import EmbeddedNats
from jetcron.sdk.client import Client
from jetcron.sdk.errors import ApiError
from jetcron.wire import subjects as s

# Seconds, not days: the server's TTL clock is the one under test. An expired message is removed within a few
# seconds of its TTL (seen: 2 to 9 s), so each wait allows half a minute.
SHORT = {"JETCRON_HISTORY_KEEP_SECONDS": "2", "JETCRON_HISTORY_MIN_SECONDS": "1"}
GONE_WITHIN = 40.0
NO_GATE = {"catchup_window_seconds": 0, "grace_seconds": 0}


def _job(name: str, schedule: dict[str, Any], *command: str, **spec: Any) -> dict[str, Any]:
    return {"spec": {"name": name, "command": list(command) or ["true"], "schedule": schedule, "misfire": NO_GATE,
                     **spec}}


async def _subjects(js: JetStreamContext, stream: str, pattern: str) -> dict[str, int]:
    return dict((await js.stream_info(stream, subjects_filter=pattern)).state.subjects or {})


async def _events_of(js: JetStreamContext, run_id: str) -> int:
    """How many of the events stream's messages are about `run_id` (their bodies name it)."""
    sub = await js.subscribe(s.EVENTS_ALL, ordered_consumer=True)
    found = 0
    try:
        while True:
            try:
                msg = await sub.next_msg(timeout=1)
            except (TimeoutError, nats.errors.TimeoutError):
                return found
            found += run_id.encode() in msg.data
    finally:
        await sub.unsubscribe()


async def test_an_ended_run_its_events_output_and_its_one_shot_job_age_out_and_are_not_fired_again(
        services: Services, nats_server: EmbeddedNats, client: Client) -> None:
    # Given a system that keeps finished runs 2 s, its agent publishing its finish reports to the events stream
    await services.start_system(agents=1, **SHORT, JETCRON_REPORT_BY="stream")
    nc = await nats.connect(nats_server.url)
    js = nc.jetstream()
    try:
        # When a one-shot job runs and prints
        await client.call("jobs.create", _job("once", {"kind": "now"}, "sh", "-c", "echo hello"))
        run = await wait_for(lambda: _one_run(client, "once", "succeeded"), 30, what="the run of once")
        rid = run["run_id"]
        assert run["keep_seconds"] == 2
        assert await _subjects(js, s.STREAM_LOGS, s.logs_filter(rid)), "its output was written"
        assert await _events_of(js, rid) >= 1, "its finish was reported on the events stream"
        # Then its record, its job, its output and its events are removed by the server
        try:
            await wait_for(lambda: _gone(js, rid), GONE_WITHIN, what=f"{rid}, its job, output and events to go")
        except AssertionError as exc:
            raise AssertionError(f"{exc}; still there: {_left}") from None
        with pytest.raises(Exception, match="not found"):
            await client.call("jobs.get", {"name": "once"})
        # and a trigger started after all of it is gone does not fire the job again: a second job it does fire
        # shows it has planned everything it holds
        services["trigger-1"].stop()
        services.start("trigger-2", "trigger", JETCRON_AGENT_ID="trigger-2", **SHORT)
        await client.call("jobs.create", _job("after", {"kind": "now"}))
        await wait_for(lambda: _one_run(client, "after", "succeeded"), 30, what="the run of after")
        assert await client.call("runs.list", {"job": "once"}) == {"items": [], "next_cursor": None}
    finally:
        await nc.close()


async def _one_run(client: Client, job: str, state: str) -> dict[str, Any] | None:
    items = (await client.call("runs.list", {"job": job}))["items"]
    assert len(items) <= 1, f"{job} ran {len(items)} times"
    return items[0] if items and items[0]["state"] == state else None


async def _gone(js: JetStreamContext, rid: str) -> bool:
    left = {"record": await _subjects(js, s.kv_stream(s.BUCKET_RUNS), s.kv_subject(s.BUCKET_RUNS, rid)),
            # the server leaves a delete marker where a job expired (watchers see it go): none with a value
            "job": await _job_value(js, "once"),
            "output": await _subjects(js, s.STREAM_LOGS, s.logs_filter(rid)), "events": await _events_of(js, rid)}
    _left.update(left)
    return not any(left.values())


_left: dict[str, object] = {}


async def _job_value(js: JetStreamContext, name: str) -> bytes | None:
    try:
        msg = await js.get_last_msg(s.kv_stream(s.BUCKET_JOBS), s.kv_subject(s.BUCKET_JOBS, name))
    except nats.js.errors.NotFoundError:
        return None
    return msg.data or None


async def test_a_run_that_has_not_ended_stays_while_ended_ones_go(
        services: Services, nats_server: EmbeddedNats, client: Client) -> None:
    # Given a run that runs far longer than the retention, and one that ends at once
    await services.start_system(agents=1, **SHORT)
    await client.call("jobs.create", _job("long", {"kind": "now"}, "sleep", "60"))
    await client.call("jobs.create", _job("quick", {"kind": "now"}))
    long_run = await wait_for(lambda: _one_run(client, "long", "running"), 30, what="long to run")
    quick = await wait_for(lambda: _one_run(client, "quick", "succeeded"), 30, what="quick to succeed")
    # When the ended one's record is gone
    nc = await nats.connect(nats_server.url)
    try:
        js = nc.jetstream()
        runs = s.kv_stream(s.BUCKET_RUNS)

        async def quick_gone() -> bool:
            return not await _subjects(js, runs, s.kv_subject(s.BUCKET_RUNS, quick["run_id"]))

        await wait_for(quick_gone, GONE_WITHIN, what="the ended run to age out")
        # Then the running one is still there and still running (its one-shot job may be gone: it fired)
        assert (await client.call("runs.get", {"run_id": long_run["run_id"]}))["state"] == "running"
    finally:
        await nc.close()


async def test_count_limits_keep_only_the_newest_runs_of_a_job(services: Services, client: Client) -> None:
    # Given a job every second that keeps its 2 newest succeeded runs (and a 1 s floor under every retention)
    await services.start_system(agents=1, JETCRON_HISTORY_MIN_SECONDS="1")
    await client.call("jobs.create", _job("tick", {"kind": "every", "every_seconds": 1},
                                          history={"keep_succeeded": 2}))

    async def succeeded() -> list[str]:
        return sorted(r["run_id"] for r in (await client.call("runs.list", {"job": "tick"}))["items"]
                      if r["state"] == "succeeded")

    # When it has succeeded at least 5 times, and is paused
    seen: set[str] = set()

    async def five() -> bool:
        seen.update(await succeeded())
        return len(seen) >= 5

    await wait_for(five, 30, what="5 succeeded runs of tick")
    await client.call("jobs.pause", {"name": "tick"})

    # Then once its last runs are past their gate, only its 2 newest succeeded runs are left
    async def pruned() -> list[str] | None:
        kept = await succeeded()
        seen.update(kept)
        return kept if len(kept) == 2 else None

    kept = await wait_for(pruned, 30, what="tick's succeeded runs pruned to 2")
    assert kept == sorted(seen)[-2:]


async def test_a_tenants_retention_stamps_its_runs_and_a_retention_outside_the_bounds_is_refused(
        services: Services, client: Client) -> None:
    # Given a tenant whose finished runs are kept 2 hours, and the cluster's default (3 days) for the others
    await services.start_system(agents=1)
    await client.call("tenants.set", {"tenant": "acme", "history": {"keep_seconds": 7200}})
    # When a job of that tenant, one of another tenant, and one with its own retention run
    await client.call("jobs.create", _job("a", {"kind": "now"}, tenant="acme"))
    await client.call("jobs.create", _job("b", {"kind": "now"}))
    await client.call("jobs.create", _job("c", {"kind": "now"}, tenant="acme", history={"keep_seconds": 86400}))
    # Then each run carries its own
    keeps = {}
    for job in ("acme.a", "b", "acme.c"):
        run = await wait_for(lambda job=job: _one_run(client, job, "succeeded"), 30, what=f"the run of {job}")
        keeps[job] = run["keep_seconds"]
    assert keeps == {"acme.a": 7200, "b": 3 * 86400, "acme.c": 86400}
    # and a retention below the floor is refused, naming the field and both bounds, storing nothing
    with pytest.raises(ApiError, match=r"spec\.history\.keep_seconds: must be between the cluster's floor 3600 s"):
        await client.call("jobs.create", _job("d", {"kind": "now"}, history={"keep_seconds": 60}))
    with pytest.raises(ApiError, match=r"history\.keep_seconds"):
        await client.call("tenants.set", {"tenant": "beta", "history": {"keep_seconds": 10**9}})
    assert (await client.call("runs.list", {"job": "d"}))["items"] == []
    assert "beta" not in {t["tenant"] for t in (await client.call("tenants.list", {}))["items"]}

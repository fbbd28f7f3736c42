"""Flows with independent roots, end to end on a real server: the design's A→C→E, B→D→E with A and B on different
schedules. E joined on the latest runs once C and D have each succeeded since E last ran, never twice on the same
successes; a job with its own schedule and upstreams fires on its schedule once they allow, and not again on an old
success however long its history; a run waiting past its wait timeout is blocked; a same-occurrence join that could
never be met is refused by name, whichever job of its flow the change is to."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import nats
import pytest
from harness import Services, run_cli, wait_for

from jetcron.core.ids import run_id
from jetcron.core.lifecycle.join_marks import JoinMark, Mark, mark_key
from jetcron.core.lifecycle.runs import new_run
from jetcron.core.models import JobSpec, Run, RunState, Schedule, ScheduleKind
from jetcron.sdk.client import Client
from jetcron.sdk.errors import ApiError
from jetcron.wire import subjects as s
from jetcron.wire.codec import decode, encode

FAR = (datetime.now(UTC) + timedelta(days=300)).isoformat()
"""An upstream that does not run by itself during the test."""


def _job(name: str, schedule: dict[str, Any] | None = None, **spec: Any) -> dict[str, Any]:
    return {"spec": {"name": name, "command": ["true"], "schedule": schedule or {"kind": "now"}, **spec}}


async def _runs(client: Client, job: str) -> list[dict[str, Any]]:
    return list((await client.call("runs.list", {"job": job, "limit": 1000}))["items"])


def _at(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def _when(run: dict[str, Any]) -> datetime:
    """When a run took its upstreams' successes: released from waiting, or recorded ready."""
    return _at(run.get("released_at") or run["created_at"])


async def test_a_downstream_of_two_roots_on_different_schedules_runs_on_their_latest_successes(
        services: Services, client: Client) -> None:
    # Given A every 2 s and B every 3 s, C after A and D after B (each on the same occurrence), and E after C and D
    await services.start_system(agents=2)
    await client.call("jobs.create", _job("a", {"kind": "every", "every_seconds": 2}))
    await client.call("jobs.create", _job("b", {"kind": "every", "every_seconds": 3}))
    await client.call("jobs.create", _job("c", depends_on=["a"]))
    await client.call("jobs.create", _job("d", depends_on=["b"]))
    # E without a schedule of its own could never join C and D on one occurrence: refused, naming why
    with pytest.raises(ApiError, match=r"its upstreams come from a, b, which fire on different schedules") as no:
        await client.call("jobs.create", _job("e", depends_on=["c", "d"]))
    assert no.value.field == "join"
    await client.call("jobs.create", _job("e", depends_on=["c", "d"], join="latest"))

    # When they have run a while
    async def e_ran(count: int) -> list[dict[str, Any]] | None:
        done = [r for r in await _runs(client, "e") if r["state"] == "succeeded"]
        return done if len(done) >= count else None

    await wait_for(lambda: e_ran(3), 60, what="E to succeed 3 times")
    for job in ("a", "b"):
        await client.call("jobs.pause", {"name": job})
    e_runs = sorted((r for r in await _runs(client, "e") if r["state"] not in ("waiting", "skipped", "blocked")),
                    key=_when)
    c_ok = sorted(_at(r["finished_at"]) for r in await _runs(client, "c") if r["state"] == "succeeded")
    d_ok = sorted(_at(r["finished_at"]) for r in await _runs(client, "d") if r["state"] == "succeeded")
    # Then each E run took a success of C and one of D that no earlier E run had taken
    previous = datetime.min.replace(tzinfo=UTC)
    for run in e_runs:
        took = _when(run)
        assert any(previous < at <= took for at in c_ok), f"{run['run_id']} ran without a new success of C"
        assert any(previous < at <= took for at in d_ok), f"{run['run_id']} ran without a new success of D"
        previous = took
    # and E never ran more often than the rarer of its upstreams succeeded
    assert len(e_runs) <= min(len(c_ok), len(d_ok))


async def test_a_job_with_its_own_schedule_and_upstreams_fires_on_its_schedule_once_they_allow(
        services: Services, client: Client) -> None:
    # Given the design's body: a schedule and depends_on (joined on the latest: it fires on its schedule)
    await services.start_system(agents=1)
    await client.call("jobs.create", _job("up", {"kind": "at", "at": FAR}))
    await client.call("jobs.create", _job("report", {"kind": "every", "every_seconds": 1}, depends_on=["up"]))
    # When it comes due while its upstream never ran: one occurrence waits, the later ones are recorded skipped
    async def waits_and_skips() -> bool:
        states = [r["state"] for r in await _runs(client, "report")]
        return states.count("waiting") == 1 and states.count("skipped") >= 2

    await wait_for(waits_and_skips, 30, what="report to wait once and skip later occurrences")
    skipped = [r for r in await _runs(client, "report") if r["state"] == "skipped"]
    assert all("still waited on its upstream jobs" in r["reason"] for r in skipped)
    waiting = next(r for r in await _runs(client, "report") if r["state"] == "waiting")
    assert "waiting on upstream jobs: up" in waiting["reason"]
    # Then its upstream's success releases the waiting occurrence, which runs
    await client.call("jobs.trigger", {"name": "up", "key": "go"})

    async def released() -> dict[str, Any] | None:
        found = await client.call("runs.get", {"run_id": waiting["run_id"]})
        return found if found["state"] == "succeeded" else None

    done = await wait_for(released, 30, what="the waiting occurrence to be released and succeed")
    assert done["released_at"] is not None


async def test_a_run_waiting_past_its_wait_timeout_is_blocked(services: Services, client: Client) -> None:
    # Given a job joined on the latest success of an upstream that never runs, with a 2 s wait timeout
    await services.start_system(agents=1)
    await client.call("jobs.create", _job("never", {"kind": "at", "at": FAR}))
    await client.call("jobs.create", _job("after", {"kind": "every", "every_seconds": 1}, depends_on=["never"],
                                          wait_timeout_seconds=2))

    # When its occurrence has waited 2 s
    async def blocked() -> dict[str, Any] | None:
        return next((r for r in await _runs(client, "after") if r["state"] == "blocked"), None)

    run = await wait_for(blocked, 30, what="the waiting run to be blocked")
    # Then it is blocked, saying why
    assert run["reason"].startswith("wait timeout: upstream jobs did not allow it within 2 s")


async def test_a_change_to_a_root_that_leaves_its_flow_unable_to_meet_is_refused_and_nothing_is_stored(
        secure_services: Services, admin: Client) -> None:
    # Given A->C->E and B->D->E, A and B hourly, E joined on the same occurrence (on a system with auth: the api
    # keeps each job's dependents in jc_joins)
    await secure_services.start_system(agents=0, core=["api"])
    hourly, two_hourly = {"kind": "every", "every_seconds": 3600}, {"kind": "every", "every_seconds": 7200}
    for name, schedule, ups in (("a", hourly, []), ("b", hourly, []), ("c", None, ["a"]), ("d", None, ["b"]),
                                ("e", None, ["c", "d"])):
        await admin.call("jobs.create", _job(name, schedule, depends_on=ups))
    before = await admin.call("jobs.get", {"name": "b", "count": 0})

    # When B, a root, is moved to another schedule
    with pytest.raises(ApiError, match=r"job 'e' joins its upstreams on the same occurrence, and its flow would start "
                                       r"from a \(every 3600 s\), b \(every 7200 s\), which fire on different "
                                       r"schedules: .* give a, b one schedule, or make 'e' join: latest") as no:
        await admin.call("jobs.update", _job("b", two_hourly))

    # Then it is refused by name, naming the schedule, and B stays as it was
    assert (no.value.code, no.value.field) == ("invalid", "schedule")
    assert await admin.call("jobs.get", {"name": "b", "count": 0}) == before
    # and E's flow, once it joins on the latest, may have roots on any schedule
    await admin.call("jobs.update", _job("e", depends_on=["c", "d"], join="latest"))
    await admin.call("jobs.update", _job("b", two_hourly))
    assert (await admin.call("jobs.get", {"name": "e", "count": 0}))["wait_timeout_seconds"] == 7 * 86400


def _stored(run: Run, state: RunState, at: datetime, **fields: Any) -> Run:
    return Run(**{**{f: getattr(run, f) for f in run.__struct_fields__}, "state": state, "created_at": at, **fields})


async def test_a_dependent_whose_history_outgrew_one_read_does_not_run_again_on_an_old_success(
        services: Services, client: Client) -> None:
    # Given what a release that kept no join marks stored: the load succeeded, the report ran on it, and then 100 of
    # the report's occurrences were skipped (more than the 64 newest records a join used to read)
    await services.start_system(agents=1)
    now = datetime.now(UTC).replace(microsecond=0)
    load = JobSpec(name="load", command=["true"], schedule=Schedule(kind=ScheduleKind.AT, at=_at(FAR)))
    report = JobSpec(name="report", command=["true"], schedule=Schedule(kind=ScheduleKind.EVERY, every_seconds=1),
                     depends_on=["load"])
    seeded: list[Run] = []
    for spec, state, at in [(load, RunState.SUCCEEDED, now - timedelta(minutes=10)),
                            (report, RunState.SUCCEEDED, now - timedelta(minutes=9)),
                            *((report, RunState.SKIPPED, now - timedelta(minutes=8, seconds=-i)) for i in range(100))]:
        run = new_run(spec, run_id=run_id(spec.key, at), state=RunState.SCHEDULED, scheduled_at=at, due_at=at, now=at)
        seeded.append(_stored(run, state, at, finished_at=at if state is RunState.SUCCEEDED else None))
    nc = await nats.connect(services.server.url)
    try:
        runs = await nc.jetstream().key_value(s.BUCKET_RUNS)
        for run in seeded:
            await runs.put(run.run_id, encode(run))
        await client.call("jobs.create", _job("load", {"kind": "at", "at": FAR}))
        await client.call("jobs.create", _job("report", {"kind": "every", "every_seconds": 1}, depends_on=["load"]))

        # When it comes due while the load has not succeeded again
        async def waits() -> dict[str, Any] | None:
            new = [r for r in await _runs(client, "report") if r["run_id"] not in {x.run_id for x in seeded}]
            return next((r for r in new if r["state"] == "waiting"), None) if len(new) >= 3 else None

        waiting = await wait_for(waits, 30, what="the report's new occurrences to wait and skip")
        # Then none of them ran on the load's old success
        new = [r for r in await _runs(client, "report") if r["run_id"] not in {x.run_id for x in seeded}]
        assert sorted({r["state"] for r in new}) in (["skipped", "waiting"], ["waiting"]), new
        assert "waiting on upstream jobs: load" in waiting["reason"]

        # And the load's next success releases the waiting one, which runs, and marks both in jc_joins
        await client.call("jobs.trigger", {"name": "load", "key": "go"})

        async def ran() -> dict[str, Any] | None:
            found = await client.call("runs.get", {"run_id": waiting["run_id"]})
            return found if found["state"] == "succeeded" else None

        done = await wait_for(ran, 30, what="the waiting occurrence to be released and succeed")
        joins = await nc.jetstream().key_value(s.BUCKET_JOINS)

        async def marked() -> bool:
            entry = await joins.get(mark_key(Mark.RAN, report.key))
            return decode(entry.value or b"{}", JoinMark).at == _at(done["released_at"])

        await wait_for(marked, 10, what="the report's ran mark")
        ok = decode((await joins.get(mark_key(Mark.OK, load.key))).value or b"{}", JoinMark)
        assert ok.at is not None and ok.at > now
        assert [r["state"] for r in await _runs(client, "report") if r["state"] not in ("waiting", "skipped")
                and r["run_id"] not in {x.run_id for x in seeded}] == ["succeeded"]
        # and `jobs get` says how long a run of it may wait: the default, which it does not set
        shown = await asyncio.to_thread(run_cli, services.server.url, "jobs", "get", "report")
        assert "a run waiting on its upstream jobs is blocked after 604800 s (the default; set " \
               "wait_timeout_seconds)" in shown.stdout, shown.stdout + shown.stderr
    finally:
        await nc.close()

"""Flows with independent roots, end to end on a real server: the design's A→C→E, B→D→E with A and B on different
schedules. E joined on the latest runs once C and D have each succeeded since E last ran, never twice on the same
successes; a job with its own schedule and upstreams fires on its schedule once they allow; a run waiting past its
wait timeout is blocked; a same-occurrence join that could never be met is refused by name."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from harness import Services, wait_for

from jetcron.sdk.client import Client
from jetcron.sdk.errors import ApiError

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

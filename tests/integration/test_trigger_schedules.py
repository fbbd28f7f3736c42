"""A schedule's life against the real server: pause and resume (misfire), update, delete, backfill."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from itertools import pairwise
from typing import Any

import pytest
from harness import Services, wait_for

from jetcron.core.ids import run_id
from jetcron.sdk.client import Client

SECOND = timedelta(seconds=1)
HORIZON = 2 * SECOND  # JETCRON_TRIGGER_HORIZON: occurrences are recorded this far ahead
TERMINAL = ("succeeded", "failed", "dead", "cancelled", "skipped")


def at(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def every(name: str, seconds: float, **extra: Any) -> dict[str, Any]:
    return {"name": name, "command": ["true"], "schedule": {"kind": "every", "every_seconds": seconds}, **extra}


async def records(client: Client, job: str) -> list[dict[str, Any]]:
    page = await client.call("runs.list", {"job": job, "limit": 1000})
    return sorted(page["items"], key=lambda r: r["scheduled_at"])


async def recorded_until(client: Client, job: str, until: datetime, timeout: float = 15) -> None:
    async def reached() -> bool:
        runs = await records(client, job)
        return bool(runs) and at(runs[-1]["scheduled_at"]) >= until

    await wait_for(reached, timeout, what=f"{job} occurrences up to {until}")


async def settled(client: Client, job: str, timeout: float = 20) -> list[dict[str, Any]]:
    """Wait until every recorded occurrence of `job` has ended; return the records."""
    async def ended() -> list[dict[str, Any]] | None:
        runs = await records(client, job)
        return runs if runs and all(r["state"] in TERMINAL for r in runs) else None

    result: list[dict[str, Any]] = await wait_for(ended, timeout, what=f"every {job} run to end")
    return result


def assert_unbroken(job: str, runs: list[dict[str, Any]], step: timedelta) -> None:
    """One record per nominal, named by it, `step` apart: nothing lost, nothing doubled."""
    nominals = [at(r["scheduled_at"]) for r in runs]
    assert [r["run_id"] for r in runs] == [run_id(job, n) for n in nominals]
    gaps = [b - a for a, b in pairwise(nominals)]
    assert gaps == [step] * len(gaps), f"gaps {sorted(set(gaps))}"


@pytest.mark.parametrize("misfire", ["all", "skip"])
async def test_occurrences_while_paused_follow_the_misfire_policy_on_resume(
        services: Services, client: Client, misfire: str) -> None:
    # Given an every-second job (grace 5 s would call a 4 s pause "on time": a pause is never on time)
    await services.start_system(agents=1)
    job = await client.call("jobs.create", {"spec": every("tick", 1, misfire={"kind": misfire, "max_catchup": 10})})
    created = at(job["created_at"])
    await recorded_until(client, "tick", created + 2 * SECOND)

    # When it is paused for 4.5 seconds, then resumed
    paused_at = at((await client.call("jobs.pause", {"name": "tick"}))["paused_at"])
    await asyncio.sleep(4.5)
    resumed_at = at((await client.call("jobs.resume", {"name": "tick"}))["resumed_at"])
    await recorded_until(client, "tick", resumed_at + 2 * SECOND)
    await client.call("jobs.pause", {"name": "tick"})
    runs = await settled(client, "tick")

    # Then the ledger holds every nominal once, and those the pause hid (past the staging horizon) follow misfire
    assert_unbroken("tick", runs, SECOND)
    hidden = [r for r in runs if paused_at + HORIZON < at(r["scheduled_at"]) < resumed_at]
    assert len(hidden) >= 2
    if misfire == "skip":
        assert {(r["state"], r["reason"]) for r in hidden} == {
            ("skipped", "paused: came due while the job was paused (policy skip)")}
    else:
        assert {r["state"] for r in hidden} == {"succeeded"}
        assert all(at(r["due_at"]) >= resumed_at for r in hidden)  # late, after the resume, each once
    # Everything else ran on time
    assert {r["state"] for r in runs if r not in hidden} == {"succeeded"}


async def test_update_takes_effect_from_the_next_occurrence(services: Services, client: Client) -> None:
    # Given an every-2-seconds job that has fired a few times
    await services.start_system(agents=1)
    job = await client.call("jobs.create", {"spec": every("beat", 2)})
    created = at(job["created_at"])
    await recorded_until(client, "beat", created + 4 * SECOND)

    # When it is changed to every 3 seconds mid-flight
    updated = await client.call("jobs.update", {"spec": every("beat", 3)})
    changed = at(updated["updated_at"])
    await recorded_until(client, "beat", changed + 9 * SECOND)
    await client.call("jobs.pause", {"name": "beat"})
    runs = await settled(client, "beat")

    # Then no nominal is doubled, the 2 s rhythm turns into 3 s once, with no gap longer than the new interval
    nominals = [at(r["scheduled_at"]) for r in runs]
    assert len(set(nominals)) == len(nominals) == len({r["run_id"] for r in runs})
    gaps = [(b - a) / SECOND for a, b in pairwise(nominals)]
    assert all(0 < g <= 3 for g in gaps), gaps
    first_new = next(i for i, r in enumerate(runs) if r["spec"]["schedule"]["every_seconds"] == 3)
    assert set(gaps[:first_new - 1]) == {2} and set(gaps[first_new:]) == {3}, gaps
    # Occurrences already recorded when the update came keep the spec they were recorded with
    assert all(r["spec"]["schedule"]["every_seconds"] == 2 for r in runs[:first_new])
    assert at(runs[first_new - 1]["scheduled_at"]) <= changed + HORIZON + SECOND
    assert {r["state"] for r in runs} == {"succeeded"}


async def test_delete_stops_firing_and_keeps_history(services: Services, client: Client) -> None:
    # Given an every-second job with some history
    await services.start_system(agents=1)
    job = await client.call("jobs.create", {"spec": every("gone", 1)})
    await recorded_until(client, "gone", at(job["created_at"]) + 2 * SECOND)

    # When it is deleted
    deleted = at((await client.call("jobs.delete", {"name": "gone"}))["updated_at"])
    await asyncio.sleep(4)

    # Then nothing past the staging horizon was recorded, and the history is still there, every run ended
    runs = await settled(client, "gone")
    assert_unbroken("gone", runs, SECOND)
    assert at(runs[-1]["scheduled_at"]) <= deleted + HORIZON + SECOND
    assert len(runs) >= 3 and {r["state"] for r in runs} == {"succeeded"}
    with pytest.raises(Exception, match="not found"):
        await client.call("jobs.get", {"name": "gone"})


async def test_backfill_records_past_occurrences_once_and_paced(services: Services, client: Client) -> None:
    # Given an every-second cron job (overlap allow) that has fired a few times
    await services.start_system(agents=1)
    spec = {"name": "fill", "command": ["true"], "schedule": {"kind": "cron", "cron": "* * * * * *"}}
    job = await client.call("jobs.create", {"spec": spec})
    created = at(job["created_at"])
    first = created.replace(microsecond=0) + SECOND
    await recorded_until(client, "fill", first + 2 * SECOND)
    await client.call("jobs.pause", {"name": "fill"})
    await asyncio.sleep((first + 2.5 * SECOND - datetime.now(created.tzinfo)) / SECOND)  # the range is past

    # When the eight seconds before its first run and its first two are backfilled at 5 runs/s
    request = {"name": "fill", "from": (first - 8 * SECOND).isoformat(), "to": (first + 2 * SECOND).isoformat(),
               "rate": 5}
    page = await client.call("jobs.backfill", request)
    # And backfilled again (a retried request)
    again = await client.call("jobs.backfill", request)

    # Then each occurrence has one record (the last two were already there), new ones paced 200 ms apart
    assert [r["run_id"] for r in page["items"]] == [r["run_id"] for r in again["items"]]
    fresh = [r for r in page["items"] if r["reason"] == "backfill"]
    assert len(fresh) == 8 and len(page["items"]) == 10
    dues = [at(r["due_at"]) for r in fresh]
    assert [round((b - a) / SECOND, 3) for a, b in pairwise(dues)] == [0.2] * 7
    runs = await settled(client, "fill")
    assert_unbroken("fill", runs, SECOND)
    assert at(runs[0]["scheduled_at"]) == first - 8 * SECOND
    assert {r["state"] for r in runs} == {"succeeded"}


async def test_backfill_under_overlap_skip_runs_one_at_a_time(services: Services, client: Client) -> None:
    # Given an hourly job with overlap skip whose runs take 0.5 s
    await services.start_system(agents=2)
    spec = {"name": "serial", "command": ["sleep", "0.5"], "overlap": "skip",
            "schedule": {"kind": "cron", "cron": "0 * * * *"}}
    job = await client.call("jobs.create", {"spec": spec})
    created = at(job["created_at"])

    # When four past hours are backfilled (fast rate: only the chain holds them back)
    page = await client.call("jobs.backfill", {"name": "serial", "from": (created - 4 * 3600 * SECOND).isoformat(),
                                               "to": created.isoformat(), "rate": 1000})

    # Then none is skipped for overlap: each waits for the one before it
    assert [r["state"] for r in page["items"]] == ["scheduled"] + ["waiting"] * 3
    assert [r["after"] for r in page["items"][1:]] == [r["run_id"] for r in page["items"][:-1]]
    runs = await settled(client, "serial", 30)
    assert len(runs) == 4 and {r["state"] for r in runs} == {"succeeded"}
    # ...and they ran one after another, never two at once
    for before, after in pairwise(runs):
        assert at(after["started_at"]) >= at(before["finished_at"])

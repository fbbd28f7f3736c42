"""`jetcron jobs update|get|backfill` against the real server, and `jetcron schedule preview` with none."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from typing import Any

import pytest
from harness import Services, run_cli

from jetcron.sdk.client import ApiError, Client


@pytest.fixture
async def api(services: Services) -> str:
    """Only the api service (these verbs need nothing else); the server's URL."""
    services.start("api", "api")
    await services["api"].wait_logged("api ready", 30)
    return services.server.url


async def jetcron(url: str | None, *args: str) -> Any:
    """Run the CLI with `-o json` (before a `--` command); its parsed output (it must succeed)."""
    cut = args.index("--") if "--" in args else len(args)
    out = await asyncio.to_thread(run_cli, url, *args[:cut], "-o", "json", *args[cut:])
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


async def fails(url: str | None, *args: str) -> tuple[int, str]:
    out = await asyncio.to_thread(run_cli, url, *args)
    assert out.returncode != 0, out.stdout
    return out.returncode, " ".join(out.stderr.split())  # rich wraps long lines


async def test_update_changes_only_what_its_flags_name(api: str) -> None:
    # Given a nightly job in New York, with five attempts
    await jetcron(api, "jobs", "create", "nightly", "--cron", "30 1 * * *", "--tz", "America/New_York",
                  "--max-attempts", "5", "--", "./backup.sh")

    # When only its command is changed
    record = await jetcron(api, "jobs", "update", "nightly", "--", "./backup.sh", "--full")

    # Then the schedule, zone and retries stay (a command-only update once turned it into a `now` job in UTC)
    spec = record["spec"]
    assert record["version"] == 2
    assert spec["command"] == ["./backup.sh", "--full"]
    assert (spec["schedule"]["kind"], spec["schedule"]["cron"], spec["schedule"]["tz"]) == (
        "cron", "30 1 * * *", "America/New_York")
    assert spec["retry"]["max_attempts"] == 5

    # And a new interval switches the kind, keeping zone and command
    spec = (await jetcron(api, "jobs", "update", "nightly", "--every", "5m"))["spec"]
    assert (spec["schedule"]["kind"], spec["schedule"]["every_seconds"], spec["schedule"]["tz"]) == (
        "every", 300.0, "America/New_York")
    assert spec["schedule"]["cron"] is None and spec["command"] == ["./backup.sh", "--full"]

    # And an update that names nothing, or a job that does not exist, is refused
    assert await fails(api, "jobs", "update", "nightly") == (
        2, "usage error: nothing to change: give a flag, a command after --, or -f spec.json")
    code, err = await fails(api, "jobs", "update", "ghost", "--timeout", "5")
    assert (code, err) == (1, "error (not_found): job 'ghost' not found")


async def test_an_update_from_a_stale_read_is_refused_and_changes_nothing(api: str, client: Client) -> None:
    # Given a job read at version 1 and then changed by someone else (version 2)
    spec = {"name": "tick", "command": ["true"], "schedule": {"kind": "every", "every_seconds": 60}}
    await client.call("jobs.create", {"spec": spec})
    await client.call("jobs.update", {"spec": {**spec, "timeout_seconds": 30}, "expected_version": 1})

    # When a change based on version 1 is written
    with pytest.raises(ApiError) as caught:
        await client.call("jobs.update", {"spec": {**spec, "command": ["false"]}, "expected_version": 1})

    # Then it is a conflict that says why, and the job keeps the other change
    assert caught.value.code == "conflict" and caught.value.retryable is False
    assert "job 'tick' is at version 2, not 1: it changed since it was read" in str(caught.value)
    stored = (await client.call("jobs.get", {"name": "tick"}))["job"]
    assert (stored["version"], stored["spec"]["command"], stored["spec"]["timeout_seconds"]) == (2, ["true"], 30)


async def test_get_shows_the_next_five_fire_times_in_the_zone_and_in_utc(api: str) -> None:
    # Given a job at 01:30 in New York (December: UTC-5)
    await jetcron(api, "jobs", "create", "nightly", "--cron", "30 1 * * *", "--tz", "America/New_York", "--",
                  "./backup.sh")

    # When it is read
    view = await jetcron(api, "jobs", "get", "nightly")

    # Then the next five fire times come in both, a day apart, after now
    fires = view["next_fires"]
    local = [datetime.fromisoformat(f["local"]) for f in fires]
    utc = [datetime.fromisoformat(f["utc"]) for f in fires]
    assert len(fires) == 5 and all(f["skipped"] is None for f in fires)
    assert all(t.strftime("%H:%M %z") == "01:30 -0500" for t in local)
    assert all(t.strftime("%H:%M %z") == "06:30 +0000" for t in utc)
    assert local == utc and {b - a for a, b in pairwise(utc)} == {timedelta(days=1)}
    assert datetime.now(UTC) < utc[0] <= datetime.now(UTC) + timedelta(days=1)
    # And the table names them too
    table = await asyncio.to_thread(run_cli, api, "jobs", "get", "nightly")
    assert "next fire times" in table.stdout and fires[0]["local"] in table.stdout


async def test_backfill_creates_the_past_occurrences_in_range_once(api: str) -> None:
    # Given an hourly job
    await jetcron(api, "jobs", "create", "hourly", "--cron", "0 * * * *", "--", "true")
    hour = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    start, end = (hour - timedelta(hours=3)).isoformat(), hour.isoformat()

    # When the last three hours are backfilled, twice
    first = await jetcron(api, "jobs", "backfill", "hourly", "--from", start, "--to", end)
    again = await jetcron(api, "jobs", "backfill", "hourly", "--from", start, "--to", end)

    # Then there is one run per hour in [from, to), the same ones both times
    nominals = [datetime.fromisoformat(r["scheduled_at"]) for r in first]
    assert nominals == [hour - timedelta(hours=h) for h in (3, 2, 1)]
    assert [r["run_id"] for r in again] == [r["run_id"] for r in first]
    # And a range outside what an instant may be is refused before anything is sent
    assert await fails(api, "jobs", "backfill", "hourly", "--from", "1900-01-01T00:00:00Z", "--to", end) == (
        2, "usage error: from: must lie between the years 2000 and 2200 (got '1900-01-01T00:00:00+00:00')")


@pytest.mark.parametrize(("args", "expected"), [
    pytest.param(("--cron", "30 1 * * *", "--tz", "America/New_York"),
                 ["2026-10-31T01:30:00-04:00", "2026-11-01T01:30:00-04:00", "2026-11-02T01:30:00-05:00"],
                 id="fall_back_fold_first"),
    pytest.param(("--cron", "30 1 * * *", "--tz", "America/New_York", "--on-fold", "last"),
                 ["2026-10-31T01:30:00-04:00", "2026-11-01T01:30:00-05:00", "2026-11-02T01:30:00-05:00"],
                 id="fall_back_fold_last"),
    pytest.param(("--cron", "30 1 * * *", "--tz", "America/New_York", "--on-fold", "both"),
                 ["2026-10-31T01:30:00-04:00", "2026-11-01T01:30:00-04:00", "2026-11-01T01:30:00-05:00"],
                 id="fall_back_fold_both"),
    pytest.param(("--cron", "0 0 31 10 *"), ["2026-10-31T00:00:00+00:00", "2027-10-31T00:00:00+00:00",
                                             "2028-10-31T00:00:00+00:00"], id="from_counts_when_it_fires"),
    pytest.param(("--every", "1d", "--tz", "America/New_York"),
                 ["2026-10-30T20:00:00-04:00", "2026-10-31T20:00:00-04:00", "2026-11-01T19:00:00-05:00"],
                 id="every_is_elapsed_time_across_dst"),
])
async def test_preview_prints_fire_times_with_offsets_and_needs_no_server(args: tuple[str, ...],
                                                                         expected: list[str]) -> None:
    assert await jetcron(None, "schedule", "preview", *args, "--from", "2026-10-31T00:00:00Z", "--count", "3") == (
        expected)


async def test_preview_counts_fire_times_and_shows_what_a_gap_skips() -> None:
    # Given 02:30 in New York, skipped in the spring-forward gap
    args = ("schedule", "preview", "--cron", "30 2 * * *", "--tz", "America/New_York", "--on-gap", "skip",
            "--from", "2026-03-07T00:00:00Z", "--count", "3")
    # Then three fire times, the skipped night left out of the list and named in the table
    assert await jetcron(None, *args) == [
        "2026-03-07T02:30:00-05:00", "2026-03-09T02:30:00-04:00", "2026-03-10T02:30:00-04:00"]
    table = (await asyncio.to_thread(run_cli, None, *args)).stdout
    assert "dst gap: 02:30 does not exist in America/New_York on 2026-03-08" in table


@pytest.mark.parametrize(("args", "message"), [
    pytest.param(("--cron", "0 0 30 2 *", "--from", "now"),
                 "usage error: schedule.cron: can never fire (got '0 0 30 2 *')", id="never_fires"),
    pytest.param(("--cron", "0 0 * * *", "--tz", "Factory", "--from", "now"),
                 "usage error: schedule.tz: unknown time zone (expected an IANA name such as 'Europe/Berlin') "
                 "(got 'Factory')", id="factory_zone"),
    pytest.param(("--every", "1h", "--from", "9999-12-31T23:59:59-01:00"),
                 "usage error: from: must lie between the years 2000 and 2200 (got '9999-12-31T23:59:59-01:00')",
                 id="from_past_the_last_utc_datetime"),
    pytest.param(("--every", "1h", "--from", "now", "--count", "0"),
                 "usage error: --count must be from 1 to 10000 (got 0)", id="count_zero"),
])
async def test_preview_refuses_bad_input_with_a_clear_error(args: tuple[str, ...], message: str) -> None:
    assert await fails(None, "schedule", "preview", *args) == (2, message)


async def test_queues_file_jobs_and_filter_lists(api: str) -> None:
    for name, queue in (("load", "etl"), ("report", "bi"), ("plain", None)):
        args = ["jobs", "create", name, "--cron", "0 0 1 1 *", *(["--queue", queue] if queue else []), "--", "true"]
        await jetcron(api, *args)
    etl = await jetcron(api, "jobs", "list", "--queue", "etl")
    assert [(j["spec"]["name"], j["spec"]["queue"]) for j in etl] == [("load", "etl")]
    everything = await jetcron(api, "jobs", "list")
    assert {j["spec"]["name"]: j["spec"]["queue"] for j in everything} == {"load": "etl", "report": "bi",
                                                                          "plain": "default"}
    assert await jetcron(api, "runs", "list", "--queue", "bi") == []
    code, err = await fails(api, "jobs", "create", "bad", "--queue", "a.b", "--", "true")
    assert code == 2 and "queue" in err and "a.b" in err


async def test_create_and_get_tables_show_the_schedule_in_words_zone_command_and_retries(api: str) -> None:
    # When a job is made and read with the tables a person reads
    made = await asyncio.to_thread(run_cli, api, "jobs", "create", "tick", "--every", "5m", "--max-attempts", "4",
                                   "--", "sh", "-c", "echo tick at $(date -u +%T)")
    await jetcron(api, "jobs", "create", "nightly", "--cron", "30 1 * 11 0", "--tz", "America/New_York", "--",
                  "./backup.sh", "--full")
    got = await asyncio.to_thread(run_cli, api, "jobs", "get", "nightly")

    # Then each says when it runs as the dashboard does, in which zone, what it runs and how it is retried
    assert made.returncode == 0, made.stderr
    row = next(line for line in made.stdout.splitlines() if "tick" in line)
    assert [cell.strip() for cell in row.strip("│ ").split("│")][:6] == [
        "tick", "active", "every 5 minutes", "UTC", "sh -c 'echo tick at $(date -u +%T)'",
        "4 attempts, 1s x2 up to 300s"]
    row = next(line for line in got.stdout.splitlines() if "nightly" in line)
    assert [cell.strip() for cell in row.strip("│ ").split("│")][:6] == [
        "nightly", "active", "At 01:30 AM, only on Sunday, only in November (America/New_York) · 30 1 * 11 0",
        "America/New_York", "./backup.sh --full", "3 attempts, 1s x2 up to 300s"]
    # And its fire times note the night 01:30 happens twice (the first Sunday of November)
    assert "dst fold: 01:30 happens twice in America/New_York on " in got.stdout
    assert "; it runs once, in the first pass (on_fold first)" in got.stdout


@pytest.mark.parametrize(("args", "note"), [
    pytest.param(("--cron", "30 1 * * *", "--from", "2026-10-31T00:00:00Z"),
                 "dst fold: 01:30 happens twice in America/New_York on 2026-11-01; it runs once, in the first pass "
                 "(on_fold first)", id="fold"),
    pytest.param(("--cron", "30 2 * * *", "--from", "2026-03-07T00:00:00Z"),
                 "dst gap: 02:30 does not exist in America/New_York on 2026-03-08; it runs at 03:00 (on_gap shift)",
                 id="gap_shifted"),
])
async def test_preview_notes_a_fire_time_a_dst_change_concerns(args: tuple[str, ...], note: str) -> None:
    table = await asyncio.to_thread(run_cli, None, "schedule", "preview", *args, "--tz", "America/New_York",
                                    "--count", "3")
    assert table.returncode == 0, table.stderr
    noted = [line for line in table.stdout.splitlines() if "dst " in line]
    assert len(noted) == 1 and note in noted[0], table.stdout
    assert "note" in table.stdout.splitlines()[1]

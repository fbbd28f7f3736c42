"""Named calendars through the running services on a real nats-server: an every-second job records the occurrences
a calendar's window holds as skipped, naming it, while the rest run; a calendar edit applies from the next
occurrence (and its preview stores nothing); bad input is refused naming the field with nothing stored; and with
real credentials, a tenant neither sees nor uses another tenant's calendar."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import nats
import pytest
from harness import Services, mint, run_cli, wait_for
from metrics_support import samples

from jetcron.auth.authority import Authority
from jetcron.auth.roles import Role
from jetcron.bus.connect import Identity
from jetcron.bus.registry import Registry
from jetcron.bus.server import EmbeddedNats
from jetcron.sdk.client import Client
from jetcron.sdk.errors import ApiError, InvalidError, NotFoundError

SECOND = timedelta(seconds=1)
RAN = ("succeeded", "running", "assigned", "scheduled")


def iso(at: datetime) -> str:
    return at.astimezone(UTC).isoformat().replace("+00:00", "Z")


def whole_second(at: datetime) -> datetime:
    return at.replace(microsecond=0)


def every_second(name: str, anchor: datetime, **extra: Any) -> dict[str, Any]:
    return {"name": name, "command": ["true"],
            "schedule": {"kind": "every", "every_seconds": 1, "anchor": anchor.isoformat()}, **extra}


async def records(client: Client, job: str) -> list[dict[str, Any]]:
    page = await client.call("runs.list", {"job": job, "limit": 1000})
    return sorted(page["items"], key=lambda r: r["scheduled_at"])


def nominal(run: dict[str, Any]) -> datetime:
    return datetime.fromisoformat(run["scheduled_at"].replace("Z", "+00:00"))


async def recorded_through(client: Client, job: str, until: datetime, timeout: float = 30) -> list[dict[str, Any]]:
    async def reached() -> list[dict[str, Any]] | None:
        runs = await records(client, job)
        return runs if runs and nominal(runs[-1]) >= until else None

    found: list[dict[str, Any]] = await wait_for(reached, timeout, what=f"{job} recorded through {until}")
    return found


async def trigger_samples(url: str) -> dict[Any, float]:
    nc = await nats.connect(url)
    try:
        registry = await Registry.open(nc.jetstream())
        found = {i.service: i for i in await registry.instances()}
        return await samples(found["trigger"])
    finally:
        await nc.close()


async def test_an_every_second_job_skips_the_window_naming_the_calendar_while_the_rest_run(
        services: Services, client: Client) -> None:
    # Given a calendar whose window opens 6 s from now for 3 s, and a job every second that excludes it
    await services.start_system(agents=1)
    base = whole_second(datetime.now(UTC))
    opens, closes = base + 6 * SECOND, base + 9 * SECOND
    await client.calendars.create({"name": "freeze", "windows": [f"{iso(opens)}/{iso(closes)}"]})
    await client.call("jobs.create", {"spec": every_second("tick", base, exclude_calendars=["freeze"])})
    # Then, before it comes, the job's next fire times show the window as one skipped row naming it
    shown = (await client.jobs.get("tick", count=12)).next_fires
    held = [f for f in shown if f.skipped]
    assert [(f.utc, f.skipped, f.until) for f in held] == [(opens.isoformat(), "calendar freeze", closes.isoformat())]
    # When it has passed
    runs = await recorded_through(client, "tick", closes + 3 * SECOND)
    # Then every occurrence in it is recorded skipped with the calendar's name, and every other one ran
    inside = [r for r in runs if opens <= nominal(r) < closes]
    outside = [r for r in runs if not opens <= nominal(r) < closes]
    assert [(nominal(r), r["state"], r["reason"]) for r in inside] == [
        (opens + i * SECOND, "skipped", "calendar freeze") for i in range(3)]
    assert outside and all(r["state"] in RAN and r["reason"] != "calendar freeze" for r in outside)
    assert any(nominal(r) < opens for r in outside) and any(nominal(r) >= closes for r in outside)

    async def counted() -> bool:
        metric = ("jetcron_occurrences_skipped_by_calendar_total", frozenset({("kind", "exclude")}))
        return (await trigger_samples(services.server.url)).get(metric) == 3

    await wait_for(counted, 10, what="the trigger's count of occurrences skipped by a calendar")


async def test_a_calendar_edit_applies_from_the_next_occurrence_and_its_preview_stores_nothing(
        services: Services, client: Client) -> None:
    # Given a calendar that holds nothing from now on, made with the CLI, and an every-second job that excludes it
    await services.start_system(agents=1)
    url = services.server.url
    made = run_cli(url, "calendars", "create", "quiet", "--window", "2020-01-01T00:00Z/2020-01-02T00:00Z", "-o", "json")
    assert made.returncode == 0, made.stderr
    job = run_cli(url, "jobs", "create", "tock", "--every", "1s", "--exclude", "quiet", "-o", "json", "--", "true")
    assert job.returncode == 0, job.stderr
    before = await recorded_through(client, "tock", datetime.now(UTC) + 2 * SECOND)
    assert before and all(r["state"] != "skipped" for r in before)
    # When an edit is previewed: the job's next fire times under it are shown, and nothing is stored
    soon = whole_second(datetime.now(UTC)) + 60 * SECOND
    preview = run_cli(url, "calendars", "update", "quiet", "--window", f"{iso(soon)}/{iso(soon + 3600 * SECOND)}",
                      "--preview", "tock", "--count", "100", "-o", "json")
    assert preview.returncode == 0, preview.stderr
    shown = json.loads(preview.stdout)
    assert [(f["skipped"], f["until"]) for f in shown["next_fires"] if f["skipped"]] == [
        ("calendar quiet", (soon + 3600 * SECOND).isoformat())]
    assert (await client.calendars.get("quiet")).version == 1
    # And when an edit is stored (through the SDK: the CLI's start-up would eat into the 4 s)
    edit_at = datetime.now(UTC)
    opens, closes = whole_second(edit_at) + 4 * SECOND, whole_second(edit_at) + 3600 * SECOND
    changed = await client.calendars.update({"name": "quiet", "windows": [f"{iso(opens)}/{iso(closes)}"]},
                                            expected_version=1)
    assert changed.version == 2
    # Then what was recorded before stays as it was, and from the window on every occurrence is skipped, naming it
    runs = await recorded_through(client, "tock", opens + 3 * SECOND)
    kept = {r["run_id"]: r["state"] for r in before}
    assert all(r["state"] != "skipped" for r in runs if r["run_id"] in kept)
    assert all(r["state"] != "skipped" for r in runs if nominal(r) < edit_at)
    late = [r for r in runs if nominal(r) >= opens]
    assert late and all((r["state"], r["reason"]) == ("skipped", "calendar quiet") for r in late)
    # And `jobs get` names the calendar for what comes next
    view = json.loads(run_cli(url, "jobs", "get", "tock", "-o", "json").stdout)
    assert view["next_fires"][0]["skipped"] == "calendar quiet" and view["next_fires"][0]["until"] == closes.isoformat()


async def test_bad_input_is_refused_naming_the_field_and_nothing_is_stored(services: Services, client: Client) -> None:
    await services.start_system(agents=0, core=["api"])
    calendars: list[tuple[dict[str, Any], str]] = [
        ({"calendar": {"name": "h"}, "ics": "BEGIN:VCALENDAR\nthis is not one\n"}, "ics"),
        ({"calendar": {"name": "h", "dates": ["2026-13-01"]}}, "calendar.dates[0]"),
        ({"calendar": {"name": "h", "dates": ["1999-12-31"]}}, "dates[0]"),
        ({"calendar": {"name": "h", "windows": ["fri 16:00-fri 16:00"]}}, "windows[0]"),
        ({"calendar": {"name": "h", "windows": ["2026-12-27T00:00Z/2026-12-24T00:00Z"]}}, "windows[0]"),
        ({"calendar": {"name": "h"}}, "calendar"),
        ({"calendar": {"name": "us.holidays", "rules": ["weekends"]}}, "name"),
        ({"calendar": {"name": "h>", "rules": ["weekends"]}}, "name"),
        ({"calendar": {"name": "h", "tz": "Mars/Olympus", "rules": ["weekends"]}}, "tz"),
        ({"calendar": {"name": "h", "dates": [(datetime(2026, 1, 1) + timedelta(days=i)).date().isoformat()
                                              for i in range(2001)]}}, "dates"),
    ]
    for body, field in calendars:
        with pytest.raises(InvalidError) as caught:
            await client.call("calendars.create", body)
        assert caught.value.field == field, (body, caught.value)
    assert (await client.calendars.list()).items == []
    # A job naming a calendar that does not exist, or calendars that would never let it run
    await client.calendars.create({"name": "weekends", "rules": ["weekends"]})
    with pytest.raises(InvalidError, match="no such calendar") as unknown:
        await client.call("jobs.create", {"spec": {"name": "j", "command": ["true"], "exclude_calendars": ["nope"],
                                                   "schedule": {"kind": "cron", "cron": "0 9 * * *"}}})
    assert (unknown.value.field, unknown.value.value) == ("exclude_calendars[0]", "nope")
    with pytest.raises(InvalidError, match="it would never run") as never:
        await client.call("jobs.create", {"spec": {"name": "j", "command": ["true"], "only_calendars": ["weekends"],
                                                   "schedule": {"kind": "cron", "cron": "0 9 * * 1-5"}}})
    assert never.value.field == "only_calendars"
    assert (await client.jobs.list()).items == []
    # The CLI says the same, exit 2
    cli = run_cli(services.server.url, "jobs", "create", "j", "--cron", "0 9 * * *", "--exclude", "nope", "--", "true")
    assert cli.returncode == 2 and "exclude_calendars[0]: no such calendar" in cli.stderr


async def test_a_tenant_neither_sees_nor_uses_another_tenants_calendar(
        secure_services: Services, secure_server: EmbeddedNats, authority: Authority, tmp_path: Path) -> None:
    await secure_services.start_system(agents=1)

    async def tenant(name: str) -> Client:
        creds = mint(authority, tmp_path / f"{name}.creds", Role.TENANT, tenant=name)
        return await Client.connect(secure_server.url, timeout=10, identity=Identity(creds=creds))

    acme, beta = await tenant("acme"), await tenant("beta")
    try:
        # Acme's calendar, and acme's every-second job that excludes it
        base = whole_second(datetime.now(UTC))
        opens, closes = base + 6 * SECOND, base + 8 * SECOND
        await acme.calendars.create({"name": "holidays", "windows": [f"{iso(opens)}/{iso(closes)}"]})
        await acme.call("jobs.create", {"spec": every_second("tick", base, exclude_calendars=["holidays"])})
        # Another tenant's calendar reads as unknown, by its name or its key
        for name in ("holidays", "acme.holidays"):
            with pytest.raises(NotFoundError):
                await beta.calendars.get(name)
        assert (await beta.calendars.list()).items == []
        with pytest.raises(InvalidError, match="no such calendar"):
            await beta.call("jobs.create", {"spec": every_second("tick", base, exclude_calendars=["holidays"])})
        with pytest.raises(ApiError):
            await beta.calendars.delete("holidays")
        # Its own of the same name is its own
        await beta.calendars.create({"name": "holidays", "rules": ["weekends"]})
        assert (await acme.calendars.get("holidays")).spec.windows == [f"{iso(opens)}/{iso(closes)}"]
        # And the trigger, with its own credential, applies acme's to acme's job
        runs = await recorded_through(acme, "tick", closes + SECOND)
        assert [nominal(r) for r in runs if r["reason"] == "calendar holidays"] == [opens, opens + SECOND]
    finally:
        await acme.close()
        await beta.close()


async def test_a_tenants_minutely_ics_file_is_refused_by_name_and_the_api_answers_right_after(
        secure_services: Services, secure_server: EmbeddedNats, authority: Authority, tmp_path: Path) -> None:
    # A file of about 150 bytes whose one event repeats every minute: expanded, years of minutes
    await secure_services.start_system(agents=0, core=["api"])
    creds = mint(authority, tmp_path / "acme.creds", Role.TENANT, tenant="acme")
    acme = await Client.connect(secure_server.url, timeout=10, identity=Identity(creds=creds))
    minutely = ("BEGIN:VCALENDAR\nVERSION:2.0\nBEGIN:VEVENT\nUID:x\nDTSTART:20260101T000000Z\nDURATION:PT1M\n"
                "RRULE:FREQ=MINUTELY\nSUMMARY:poll\nEND:VEVENT\nEND:VCALENDAR\n")
    assert len(minutely) < 160
    try:
        with pytest.raises(InvalidError, match="calendar 'busy': event 'poll' repeats MINUTELY; rules finer than "
                                               "HOURLY are refused") as caught:
            await acme.calendars.create({"name": "busy"}, ics=minutely)
        assert (caught.value.field, caught.value.value) == ("ics", "RRULE:FREQ=MINUTELY")
        # Right after, the api answers: nothing was stored, and another calendar is made
        assert (await acme.calendars.list()).items == []
        made = await acme.calendars.create({"name": "weekends", "rules": ["weekends"]})
        assert (made.spec.tenant, made.version) == ("acme", 1)
    finally:
        await acme.close()

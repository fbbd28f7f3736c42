"""`schedule preview` with calendars, through its two doors on a real nats-server: the CLI's `--exclude/--only`
and REST's `GET /api/v1/schedule/preview?exclude=&only=` read the caller's calendars through the API and show each
occurrence a calendar skips, naming it; a name the caller has no calendar of is refused, and through REST a tenant
cannot read, use or delete another tenant's calendar."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from harness import Services, run_cli
from rest_support import Rest

from jetcron.sdk.client import Client

# 09:00 UTC daily from Monday 2027-03-01; `holidays` holds Wednesday the 3rd, `weekdays` Monday to Friday.
SCHEDULE = ("--cron", "0 9 * * *", "--from", "2027-03-01T00:00:00Z", "--count", "5")
HOLIDAYS: dict[str, Any] = {"name": "holidays", "dates": ["2027-03-03"]}
WEEKDAYS: dict[str, Any] = {"name": "weekdays", "rules": ["weekdays"]}


def at(day: int) -> str:
    return f"2027-03-{day:02d}T09:00:00+00:00"


# What both doors show with both calendars: five fire times, the holiday skipped naming its calendar, and the
# weekend one row (outside the only calendar until Monday starts; the Sunday occurrence is inside that row).
BOTH = [(at(1), None, None), (at(2), None, None), (at(3), "calendar holidays", None), (at(4), None, None),
        (at(5), None, None), (at(6), "calendar weekdays: outside it (only)", "2027-03-08T00:00:00+00:00"),
        (at(8), None, None)]


def table_rows(text: str) -> list[tuple[str, str | None, str | None]]:
    """The CLI table's rows as (utc, skipped, until); an empty cell (or the `until` column left out when no run of
    occurrences is skipped) is None. The last column is the DST note."""
    rows = []
    for line in text.splitlines():
        cells = [c.strip() for c in line.split("│")[1:-1]]
        if len(cells) in (4, 5) and cells[1].startswith("2027-"):
            rows.append((cells[1], cells[2] or None, cells[3] or None if len(cells) == 5 else None))
    return rows


async def cli(url: str, *args: str) -> Any:
    return await asyncio.to_thread(run_cli, url, "schedule", "preview", *SCHEDULE, *args)


async def test_the_cli_preview_shows_what_each_calendar_skips(services: Services, client: Client) -> None:
    services.start("api", "api")  # the preview reads calendars through the API, nothing else
    await services["api"].wait_logged("api ready", 30)
    url = services.server.url
    await client.calendars.create(HOLIDAYS)
    await client.calendars.create(WEEKDAYS)

    # Both flags: the table names the calendar of each skipped occurrence, and when a run of them ends
    both = await cli(url, "--exclude", "holidays", "--only", "weekdays")
    assert both.returncode == 0, both.stderr
    assert table_rows(both.stdout) == BOTH
    # and -o json lists only the fire times
    fired = await cli(url, "--exclude", "holidays", "--only", "weekdays", "-o", "json")
    assert json.loads(fired.stdout) == [at(1), at(2), at(4), at(5), at(8)]
    # --exclude alone: the holiday only (Saturday now fires)
    excluded = await cli(url, "--exclude", "holidays", "-o", "json")
    assert json.loads(excluded.stdout) == [at(1), at(2), at(4), at(5), at(6)]
    # --only alone: the weekdays, the holiday among them
    only = await cli(url, "--only", "weekdays", "-o", "json")
    assert json.loads(only.stdout) == [at(1), at(2), at(3), at(4), at(5)]
    # names comma-separated in one flag: both excluded, so only weekends fire
    listed = await cli(url, "--exclude", "holidays,weekdays", "-o", "json")
    assert listed.returncode == 0 and json.loads(listed.stdout) == [at(6), at(7), at(13), at(14), at(20)]
    # Without calendars nothing is skipped
    plain = await cli(url)
    assert table_rows(plain.stdout) == [(at(day), None, None) for day in range(1, 6)]
    # A name with no calendar is a usage error naming the flag
    unknown = await cli(url, "--exclude", "holiday")
    assert unknown.returncode == 2 and "--exclude holiday: no such calendar" in unknown.stderr, unknown.stderr


async def test_the_rest_preview_shows_what_each_calendar_skips_and_a_tenant_keeps_to_its_own(rest: Rest) -> None:
    params: dict[str, str | int] = {"cron": "0 9 * * *", "from": "2027-03-01T00:00:00Z", "count": 5}
    async with rest.http(await rest.token("acme")) as acme, rest.http(await rest.token("globex")) as globex:
        for body in (HOLIDAYS, WEEKDAYS):
            made = await acme.post("/api/v1/calendars", json=body)
            assert made.status_code == 201, made.text
        # acme's preview with both calendars, and with each alone
        shown = await acme.get("/api/v1/schedule/preview", params={**params, "exclude": "holidays",
                                                                    "only": "weekdays"})
        assert shown.status_code == 200, shown.text
        assert [(r["utc"], r["skipped"], r["until"]) for r in shown.json()] == BOTH
        assert all(r["local"] == r["utc"] for r in shown.json())
        excluded = (await acme.get("/api/v1/schedule/preview", params={**params, "exclude": "holidays"})).json()
        assert [(r["utc"], r["skipped"]) for r in excluded] == [
            (at(1), None), (at(2), None), (at(3), "calendar holidays"), (at(4), None), (at(5), None), (at(6), None)]
        # a name acme has no calendar of: 422 naming the parameter
        unknown = await acme.get("/api/v1/schedule/preview", params={**params, "only": "weekday"})
        assert unknown.status_code == 422 and unknown.json()["field"] == "only", unknown.text

        # globex cannot read acme's calendar by its name or key (404 problem), nor preview with it, nor delete it
        for name in ("holidays", "acme.holidays"):
            missing = await globex.get(f"/api/v1/calendars/{name}")
            assert missing.status_code == 404, missing.text
            assert missing.headers["content-type"].startswith("application/problem+json")
            assert missing.json()["status"] == 404
        assert (await globex.get("/api/v1/calendars")).json()["items"] == []
        borrowed = await globex.get("/api/v1/schedule/preview", params={**params, "exclude": "holidays"})
        assert borrowed.status_code == 422 and borrowed.json()["field"] == "exclude", borrowed.text
        assert (await globex.delete("/api/v1/calendars/holidays")).status_code == 404
        # and acme's is still there, as made
        kept = await acme.get("/api/v1/calendars/holidays")
        assert kept.status_code == 200 and kept.json()["calendar"]["spec"]["dates"] == ["2027-03-03"], kept.text

"""The calendar verbs and a job's calendars read for the job verbs, on the store's twins: bad input refused naming
the field with nothing stored, a tenant's calendars its own (another's reads as unknown), a calendar no longer
deletable or editable into one that stops a job for good while a job names it, the preview of an edit, and an ICS
file read off the event loop within a time budget."""

from __future__ import annotations

import asyncio
import threading
from datetime import UTC, datetime
from typing import Any

import msgspec
import pytest
from twin_support import twin_context

from jetcron.core.errors import Conflict, InvalidSpec, NotFound
from jetcron.core.models import JobRecord, JobSpec, Schedule, ScheduleKind
from jetcron_services.api import calendars as api_calendars
from jetcron_services.api.calendars import Calendars, job_calendars
from jetcron_services.api.call import Call
from jetcron_services.runtime import Context

T0 = datetime(2026, 12, 1, tzinfo=UTC)
WEEKENDS = {"name": "weekends", "rules": ["weekends"]}


def call(tenant: str | None = "acme", **body: Any) -> Call:
    return Call(msgspec.json.encode(body), tenant)


async def job(ctx: Context, *, tenant: str = "acme", **fields: Any) -> JobRecord:
    spec = JobSpec(name="nightly", command=["true"], tenant=tenant,
                   schedule=Schedule(kind=ScheduleKind.CRON, cron="0 9 * * *"), **fields)
    record = JobRecord(spec=spec, created_at=T0, updated_at=T0)
    await ctx.jobs.create(spec.key, record)
    return record


async def test_a_calendar_is_its_tenants_own_and_another_tenants_reads_as_unknown() -> None:
    ctx = twin_context()
    verbs = Calendars(ctx)
    made = await verbs.create(call(calendar=WEEKENDS))
    assert (made.spec.key, made.version) == ("acme.weekends", 1)
    assert (await verbs.get(call(name="weekends"))).spec.rules == made.spec.rules
    assert (await verbs.get(call(None, name="acme.weekends"))).spec.tenant == "acme"  # the admin, by its key
    for other in (call("other", name="weekends"), call("other", name="acme.weekends")):
        with pytest.raises(NotFound, match="calendar"):
            await verbs.get(other)
    assert [c.spec.name for c in (await verbs.list(call("other"))).items] == []
    assert [c.spec.name for c in (await verbs.list(call())).items] == ["weekends"]
    # A job of another tenant naming it finds no such calendar.
    spec = JobSpec(name="j", command=["true"], tenant="other", exclude_calendars=["weekends"])
    with pytest.raises(InvalidSpec, match="no such calendar") as caught:
        await job_calendars(ctx.calendars, spec, strict=True)
    assert (caught.value.field, caught.value.value) == ("exclude_calendars[0]", "weekends")


@pytest.mark.parametrize(("body", "field", "message"), [
    ({"calendar": {"name": "empty"}}, "calendar", "is empty"),
    ({"calendar": {"name": "a.b", "rules": ["weekends"]}}, "name", "no dots"),
    ({"calendar": {"name": "x", "dates": ["2026-02-30"]}}, "calendar.dates[0]", "Invalid RFC3339 encoded date"),
    ({"calendar": {"name": "x", "windows": ["mon 25:00-tue 01:00"]}}, "windows[0]", "not a time of day"),
    ({"calendar": {"name": "x", "rules": ["holidays"]}}, "calendar.rules[0]", "Invalid enum value"),
    ({"calendar": {"name": "x", "rules": ["weekends"], "colour": "red"}}, "calendar.colour", "unknown field"),
    ({"calendar": {"name": "x", "rules": ["weekends"], "tenant": "other"}}, "calendar.tenant", "set by your"),
    ({"calendar": {"name": "x"}, "ics": "BEGIN:VCALENDAR\nnope\n"}, "ics", "not a valid iCalendar file"),
])
async def test_bad_input_is_refused_naming_the_field_and_nothing_is_stored(body: dict[str, Any], field: str,
                                                                           message: str) -> None:
    ctx = twin_context()
    with pytest.raises(InvalidSpec, match=message) as caught:
        await Calendars(ctx).create(call(**body))
    assert caught.value.field == field
    assert await ctx.calendars.keys() == []


async def test_an_ics_text_adds_its_events() -> None:
    ctx = twin_context()
    text = ("BEGIN:VCALENDAR\nVERSION:2.0\nPRODID:-//t//t//EN\nBEGIN:VEVENT\nUID:1\nDTSTAMP:20260101T000000Z\n"
            "DTSTART;VALUE=DATE:20261225\nEND:VEVENT\nEND:VCALENDAR\n")
    made = await Calendars(ctx).create(call(calendar={"name": "h", "dates": ["2027-01-01"]}, ics=text))
    assert [d.isoformat() for d in made.spec.dates] == ["2026-12-25", "2027-01-01"]


async def test_a_calendar_a_job_names_is_not_deleted_nor_edited_into_one_that_stops_it() -> None:
    ctx = twin_context()
    verbs = Calendars(ctx)
    await verbs.create(call(calendar=WEEKENDS))
    await job(ctx, exclude_calendars=["weekends"])
    with pytest.raises(Conflict, match=r"calendar 'weekends' is named by 1 job\(s\) \(nightly\)"):
        await verbs.delete(call(name="weekends"))
    with pytest.raises(InvalidSpec, match="job 'nightly' names it and would never run") as caught:
        await verbs.update(call(calendar={"name": "weekends", "rules": ["weekends"], "windows": ["00:00-23:59"]}))
    assert caught.value.field == "calendar"
    assert (await ctx.calendars.get("acme.weekends"))[0].version == 1
    changed = await verbs.update(call(calendar={"name": "weekends", "rules": ["weekends"], "dates": ["2026-12-25"]},
                                      expected_version=1))
    assert changed.version == 2
    with pytest.raises(Conflict, match="is at version 2, not 1"):
        await verbs.update(call(calendar=WEEKENDS, expected_version=1))


async def test_a_calendar_no_job_names_is_deleted() -> None:
    ctx = twin_context()
    verbs = Calendars(ctx)
    await verbs.create(call(calendar=WEEKENDS))
    await job(ctx, tenant="other", exclude_calendars=["weekends"])  # another tenant's: not this calendar
    assert (await verbs.delete(call(name="weekends"))).spec.name == "weekends"
    with pytest.raises(NotFound):
        await verbs.get(call(name="weekends"))
    assert (await verbs.create(call(calendar=WEEKENDS))).version == 1


async def test_the_preview_of_an_edit_shows_what_it_skips_and_stores_nothing() -> None:
    ctx = twin_context()
    verbs = Calendars(ctx)
    await verbs.create(call(calendar={"name": "days-off", "dates": ["2030-01-01"]}))
    await job(ctx, exclude_calendars=["days-off"])
    tomorrow = ctx.clock.now().date().toordinal() + 1
    day = datetime.fromordinal(tomorrow).date().isoformat()
    shown = await verbs.preview(call(calendar={"name": "days-off", "dates": [day]}, job="nightly", count=2))
    assert (shown.job, shown.calendar) == ("nightly", "days-off")
    skipped = [f for f in shown.next_fires if f.skipped]
    assert [f.utc[:10] for f in skipped] == [day] and skipped[0].skipped == "calendar days-off"
    assert len([f for f in shown.next_fires if f.skipped is None]) == 2
    assert [d.isoformat() for d in (await ctx.calendars.get("acme.days-off"))[0].spec.dates] == ["2030-01-01"]
    with pytest.raises(NotFound, match="job 'nightly'"):
        await verbs.preview(call("other", calendar={"name": "days-off", "dates": [day]}, job="nightly"))


async def test_an_ics_file_is_read_off_the_event_loop_and_refused_past_its_budget(
        monkeypatch: pytest.MonkeyPatch) -> None:
    ctx = twin_context()
    verbs = Calendars(ctx)
    release, finished = threading.Event(), threading.Event()

    def stuck(text: str, **_: Any) -> None:  # a read that will not end by itself
        release.wait(30)
        finished.set()

    monkeypatch.setattr(api_calendars, "parse_ics", stuck)
    monkeypatch.setattr(api_calendars, "BUDGET_S", 0.2)
    monkeypatch.setattr(api_calendars, "_ICS_GRACE_S", 0.1)
    creating = asyncio.ensure_future(verbs.create(call(calendar={"name": "h"}, ics="BEGIN:VCALENDAR\n")))
    await asyncio.sleep(0)
    # While the file is being read, the api answers another verb
    assert (await verbs.list(call())).items == []
    with pytest.raises(InvalidSpec, match=r"calendar 'h': took more than 0\.2 s to read") as caught:
        await creating
    assert caught.value.field == "ics"
    assert await ctx.calendars.keys() == []
    release.set()
    assert await asyncio.to_thread(finished.wait, 10)

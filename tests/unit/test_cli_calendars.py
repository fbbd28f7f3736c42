"""`calendars create/update` flags and `jobs create/update --exclude/--only`: what a flag names changes, bad input
is a usage error (exit 2) naming the flag, before anything is sent."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from jetcron.cli.calendar_flags import CalendarFlags, apply_calendar_flags, new_calendar
from jetcron.cli.job_flags import JobFlags, apply_flags
from jetcron.cli.main import app
from jetcron.core.errors import InvalidSpec

NOW = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)
STORED: dict[str, Any] = {"name": "us-holidays", "tz": "America/New_York", "dates": ["2026-12-25"],
                          "rules": [], "windows": ["fri 16:00-mon 08:00"], "description": "", "tenant": "acme"}
ICS = ("BEGIN:VCALENDAR\nVERSION:2.0\nPRODID:-//t//t//EN\nBEGIN:VEVENT\nUID:1\nDTSTAMP:20260101T000000Z\n"
       "DTSTART;VALUE=DATE:20270101\nEND:VEVENT\nBEGIN:VEVENT\nUID:2\nDTSTAMP:20260101T000000Z\n"
       "DTSTART:20261224T120000Z\nDTEND:20261224T180000Z\nEND:VEVENT\nEND:VCALENDAR\n")


def test_a_new_calendar_from_its_flags() -> None:
    flags = CalendarFlags(dates=["2026-12-25,2027-01-01", "2026-11-26"], rules=["weekends"],
                          windows=["fri 16:00-mon 08:00"], tz="America/New_York")
    assert new_calendar("us-holidays", flags, NOW) == {
        "name": "us-holidays", "dates": ["2026-11-26", "2026-12-25", "2027-01-01"], "rules": ["weekends"],
        "windows": ["fri 16:00-mon 08:00"], "tz": "America/New_York"}


@pytest.mark.parametrize(("flags", "expected"), [
    pytest.param({"dates": ["2027-01-01"]}, {"dates": ["2027-01-01"]}, id="dates_replace_the_dates"),
    pytest.param({"rules": ["weekdays"]}, {"rules": ["weekdays"]}, id="rules"),
    pytest.param({"windows": ["22:00-06:00"]}, {"windows": ["22:00-06:00"]}, id="windows_replace_the_windows"),
    pytest.param({"tz": "UTC", "description": "holidays"}, {"tz": "UTC", "description": "holidays"}, id="tz"),
    pytest.param({"ics": ICS}, {"dates": ["2027-01-01"],
                                "windows": ["2026-12-24T12:00:00+00:00/2026-12-24T18:00:00+00:00"]},
                 id="ics_replaces_dates_and_windows"),
    pytest.param({"ics": ICS, "dates": ["2026-12-31"]}, {"dates": ["2026-12-31", "2027-01-01"],
                                                         "windows": ["2026-12-24T12:00:00+00:00/"
                                                                     "2026-12-24T18:00:00+00:00"]},
                 id="ics_with_dates_beside_it"),
])
def test_update_flags_change_only_what_they_name(flags: dict[str, Any], expected: dict[str, Any]) -> None:
    out = apply_calendar_flags(STORED, CalendarFlags(**flags), NOW)
    assert {k: v for k, v in out.items() if STORED.get(k) != v} == expected


@pytest.mark.parametrize(("flags", "field", "message"), [
    ({"dates": ["2026-13-01"]}, "--dates", "is not a date YYYY-MM-DD"),
    ({"dates": ["christmas"]}, "--dates", "is not a date"),
    ({"rules": ["holidays"]}, "--rule", "is not a rule"),
    ({"windows": ["fri 16:00"]}, "--window", "must be one of"),
    ({"ics": "not a calendar", "ics_name": "--ics x.ics"}, "--ics x.ics", "not a valid iCalendar file"),
])
def test_bad_flags_are_refused_naming_the_flag(flags: dict[str, Any], field: str, message: str) -> None:
    with pytest.raises(InvalidSpec, match=message) as caught:
        new_calendar("c", CalendarFlags(**flags), NOW)
    assert caught.value.field == field


def test_job_flags_name_calendars_and_an_empty_one_clears_them() -> None:
    spec: dict[str, Any] = {"name": "nightly", "command": ["true"], "exclude_calendars": ["old"],
                            "only_calendars": ["business-days"]}
    out = apply_flags(spec, JobFlags(exclude=["us-holidays,freeze"]), NOW)
    assert (out["exclude_calendars"], out["only_calendars"]) == (["us-holidays", "freeze"], ["business-days"])
    assert apply_flags(spec, JobFlags(only=[""]), NOW)["only_calendars"] == []


def run(*args: str) -> Any:
    return CliRunner().invoke(app, ["--nats", "nats://127.0.0.1:1", *args])


@pytest.mark.parametrize(("args", "message"), [
    (("calendars", "create", "x", "--dates", "2026-02-30"), "--dates: is not a date"),
    (("calendars", "create", "x", "--window", "someday"), "--window: must be one of"),
    (("calendars", "create", "x", "--rule", "weekdays", "--preview", "nightly"), "--preview goes with"),
    (("calendars", "update", "x"), "nothing to change"),
    (("calendars", "create"), "give the NAME"),
])
def test_the_cli_refuses_bad_input_before_it_connects(args: tuple[str, ...], message: str) -> None:
    result = run(*args)
    assert result.exit_code == 2, result.output
    assert message in " ".join(result.output.split())


def test_an_ics_file_that_is_not_one_is_a_usage_error(tmp_path: Path) -> None:
    bad = tmp_path / "holidays.ics"
    bad.write_text("BEGIN:VCALENDAR\nthis is not\n")
    result = run("calendars", "create", "us-holidays", "--ics", str(bad))
    assert result.exit_code == 2 and "not a valid iCalendar file" in " ".join(result.output.split())

"""Importing an iCalendar file: all-day and timed events with their zones, recurrences expanded over a bounded
horizon, cancelled ones left out, and malformed files refused naming the field."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest

from jetcron.core.calendar_time import compile_calendar
from jetcron.core.calendars import CalendarSpec, validate_calendar
from jetcron.core.errors import InvalidSpec
from jetcron.core.ics import parse_ics

NOW = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)
BERLIN = """BEGIN:VTIMEZONE
TZID:Europe/Berlin
BEGIN:STANDARD
DTSTART:19701025T030000
TZOFFSETFROM:+0200
TZOFFSETTO:+0100
RRULE:FREQ=YEARLY;BYMONTH=10;BYDAY=-1SU
END:STANDARD
BEGIN:DAYLIGHT
DTSTART:19700329T020000
TZOFFSETFROM:+0100
TZOFFSETTO:+0200
RRULE:FREQ=YEARLY;BYMONTH=3;BYDAY=-1SU
END:DAYLIGHT
END:VTIMEZONE
"""


def ics(*events: str, zones: str = BERLIN) -> str:
    body = "".join(f"BEGIN:VEVENT\nUID:{i}@test\nDTSTAMP:20260101T000000Z\n{e.strip()}\nEND:VEVENT\n"
                   for i, e in enumerate(events))
    return f"BEGIN:VCALENDAR\nVERSION:2.0\nPRODID:-//jetcron//test//EN\n{zones}{body}END:VCALENDAR\n"


def test_all_day_events_become_their_days_and_timed_ones_windows_in_their_zones() -> None:
    text = ics("DTSTART;VALUE=DATE:20261225\nDTEND;VALUE=DATE:20261227\nSUMMARY:Christmas",
               "DTSTART;VALUE=DATE:20261231\nSUMMARY:one day, no end",
               "DTSTART;TZID=Europe/Berlin:20261204T160000\nDTEND;TZID=Europe/Berlin:20261207T080000\nSUMMARY:freeze",
               "DTSTART:20261210T120000Z\nDURATION:PT2H",
               "DTSTART:20261211T220000\nDTEND:20261212T020000\nSUMMARY:floating",
               "DTSTART:20261213T120000Z\nSUMMARY:no end, covers nothing",
               "DTSTART;VALUE=DATE:20261230\nSTATUS:CANCELLED")
    found = parse_ics(text, now=NOW)
    assert found.dates == [date(2026, 12, 25), date(2026, 12, 26), date(2026, 12, 31)]
    assert found.windows == ["2026-12-04T15:00:00+00:00/2026-12-07T07:00:00+00:00",
                             "2026-12-10T12:00:00+00:00/2026-12-10T14:00:00+00:00",
                             "2026-12-11T22:00:00/2026-12-12T02:00:00"]
    # The floating event is wall time in the calendar's zone; the others are absolute.
    spec = CalendarSpec(name="c", tz="Asia/Tokyo", dates=found.dates, windows=found.windows)
    validate_calendar(spec)
    tokyo = compile_calendar(spec)
    assert tokyo.contains(datetime(2026, 12, 11, 13, 30, tzinfo=UTC))  # 22:30 in Tokyo
    assert not tokyo.contains(datetime(2026, 12, 11, 22, 30, tzinfo=UTC))
    assert tokyo.contains(datetime(2026, 12, 4, 15, 0, tzinfo=UTC))


def test_a_yearly_rule_is_expanded_from_a_year_back_to_five_years_ahead() -> None:
    found = parse_ics(ics("DTSTART;VALUE=DATE:20000101\nRRULE:FREQ=YEARLY\nSUMMARY:New year",
                          "DTSTART;VALUE=DATE:20261126\nRRULE:FREQ=YEARLY;BYMONTH=11;BYDAY=4TH\nSUMMARY:Thanksgiving"),
                      now=NOW)
    assert [d for d in found.dates if d.month == 1] == [date(y, 1, 1) for y in range(2026, 2032)]
    assert [d for d in found.dates if d.month == 11] == [
        date(2026, 11, 26), date(2027, 11, 25), date(2028, 11, 23), date(2029, 11, 22), date(2030, 11, 28),
        date(2031, 11, 27)]


@pytest.mark.parametrize(("text", "message"), [
    ("hello", "not a valid iCalendar file"),
    ("", "not a valid iCalendar file"),
    ("BEGIN:VCALENDAR\nVERSION:2.0\nEND:VCALENDAR\n", "holds no events"),
    ("BEGIN:VCALENDAR\nBEGIN:VEVENT\nUID:x\nDTSTART:2026XX\nEND:VEVENT\nEND:VCALENDAR\n", "not a valid iCalendar"),
    (ics("DTSTART;VALUE=DATE:20261201\nDTEND;VALUE=DATE:20350101"), "more than 2000 dates"),
])
def test_a_malformed_or_oversized_file_is_refused_naming_the_field(text: str, message: str) -> None:
    with pytest.raises(InvalidSpec, match=message) as caught:
        parse_ics(text, now=NOW, field="--ics holidays.ics")
    assert caught.value.field == "--ics holidays.ics"

"""Importing an iCalendar file: all-day and timed events with their zones, recurrences expanded over a bounded
horizon, cancelled ones left out, and malformed files refused naming the field. A file is bounded before it is
expanded: rules finer than hourly, or that could walk for centuries, are refused by name; a rule is walked one
instance at a time and stops at the instance that passes a limit; a read has a time budget."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, date, datetime

import pytest
import recurring_ical_events
from dateutil.rrule import rrule

from jetcron.core.errors import InvalidSpec
from jetcron.core.timing.calendar_time import compile_calendar
from jetcron.core.timing.calendars import CalendarSpec, validate_calendar
from jetcron.core.timing.ics import MAX_OCCURRENCES, MAX_RECURRENCES, MAX_ZONE_CHANGES, parse_ics

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


OUTLOOK = """BEGIN:VTIMEZONE
TZID:W. Europe Standard Time
BEGIN:STANDARD
DTSTART:16010101T030000
TZOFFSETFROM:+0200
TZOFFSETTO:+0100
RRULE:FREQ=YEARLY;BYDAY=-1SU;BYMONTH=10
END:STANDARD
BEGIN:DAYLIGHT
DTSTART:16010101T020000
TZOFFSETFROM:+0100
TZOFFSETTO:+0200
RRULE:FREQ=YEARLY;BYDAY=-1SU;BYMONTH=3
END:DAYLIGHT
END:VTIMEZONE
"""


def zone(rule: str) -> str:
    return (f"BEGIN:VTIMEZONE\nTZID:Spin\nBEGIN:STANDARD\nDTSTART:20000101T000000\nTZOFFSETFROM:+0200\n"
            f"TZOFFSETTO:+0100\nRRULE:{rule}\nEND:STANDARD\nBEGIN:DAYLIGHT\nDTSTART:20000101T000030\n"
            f"TZOFFSETFROM:+0100\nTZOFFSETTO:+0200\nRRULE:{rule}\nEND:DAYLIGHT\nEND:VTIMEZONE\n")


@pytest.fixture
def walked(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[datetime]]:
    """Every instance dateutil yields, as it yields it; and any expansion of the file fails the test."""
    seen: list[datetime] = []
    original = rrule._iter

    def counted(self: rrule) -> Iterator[datetime]:
        for at in original(self):
            seen.append(at)
            yield at

    def expanded(*_: object) -> None:
        pytest.fail("the file was expanded before its rules were bounded")

    monkeypatch.setattr(rrule, "_iter", counted)
    monkeypatch.setattr(recurring_ical_events.CalendarQuery, "between", expanded)
    yield seen


@pytest.mark.parametrize(("text", "message"), [
    (ics("DTSTART:20261204T000000Z\nRRULE:FREQ=SECONDLY\nSUMMARY:tick", zones=""),
     "event 'tick' repeats SECONDLY; rules finer than HOURLY are refused"),
    (ics("DTSTART:20261204T000000Z\nRRULE:FREQ=MINUTELY;INTERVAL=5\nSUMMARY:poll", zones=""),
     "event 'poll' repeats MINUTELY; rules finer than HOURLY are refused"),
    (ics("DTSTART:20261204T000000Z\nRRULE:FREQ=HOURLY;BYMINUTE=0,15,30,45\nSUMMARY:quarters", zones=""),
     r"event 'quarters' repeats more than once an hour \(BYMINUTE has 4 values\); rules finer than HOURLY"),
    (ics("DTSTART:20261204T000000Z\nRRULE:FREQ=DAILY;BYHOUR=9;BYSECOND=0,1\nSUMMARY:twice", zones=""),
     r"event 'twice' repeats more than once an hour \(BYSECOND has 2 values\)"),
    (ics("DTSTART;TZID=Spin:20261204T090000\nDURATION:PT1H\nSUMMARY:meeting", zones=zone("FREQ=MINUTELY")),
     "time zone 'Spin' repeats MINUTELY; rules finer than HOURLY are refused"),
    (ics("DTSTART;TZID=Spin:20261204T090000\nDURATION:PT1H\nSUMMARY:meeting", zones=zone("FREQ=DAILY")),
     "time zone 'Spin' changes its offset DAILY; a time zone's rules must be YEARLY"),
    (ics("DTSTART;VALUE=DATE:20261204\nRRULE:FREQ=DAILY;BYMONTH=2;BYMONTHDAY=30\nSUMMARY:never", zones=""),
     "event 'never' repeats DAILY narrowed by BYMONTHDAY, BYMONTH|event 'never' repeats DAILY narrowed by BYMONTH"),
    (ics("DTSTART;VALUE=DATE:20261207\nRRULE:FREQ=DAILY;INTERVAL=7;BYDAY=TU\nSUMMARY:never", zones=""),
     "event 'never' repeats every 7 DAILY periods narrowed by BYDAY"),
    (ics("DTSTART;VALUE=DATE:20270201\nRRULE:FREQ=MONTHLY;INTERVAL=0;BYMONTHDAY=31\nSUMMARY:stuck", zones=""),
     "event 'stuck' has INTERVAL=0: it must be 1 or more"),
    (ics("DTSTART;TZID=Spin:20261204T090000\nDURATION:PT1H\nSUMMARY:meeting",
         zones=zone("FREQ=YEARLY").replace("END:STANDARD", "EXRULE:FREQ=MINUTELY\nEND:STANDARD")),
     "time zone 'Spin' repeats MINUTELY; rules finer than HOURLY are refused"),
    (ics("DTSTART;VALUE=DATE:20261204\nRRULE:FREQ=YEARLY;BYEASTER=0\nSUMMARY:easter", zones=""),
     r"event 'easter' has rule parts RFC 5545 does not define \(BYEASTER\)"),
    (ics("DTSTART:20261204T090000Z\nDTEND:90001231T000000Z\nSUMMARY:forever", zones=""),
     r"event 'forever' names an instant after the year 2200 \(DTEND\)"),
])
def test_a_rule_finer_than_hourly_or_unbounded_to_walk_is_refused_by_name_before_anything_is_expanded(
        walked: list[datetime], text: str, message: str) -> None:
    with pytest.raises(InvalidSpec, match=message) as caught:
        parse_ics(text, now=NOW, field="--ics spam.ics")
    assert caught.value.field == "--ics spam.ics"
    assert walked == []  # refused on its words, before a single instance was walked


@pytest.mark.parametrize(("text", "walks", "message"), [
    # Hourly from the day of the import: past the horizon's occurrences within four months (its DTSTART counts
    # once itself, so the rule stops at its 3000th instance)
    (ics("DTSTART:20261204T000000Z\nDURATION:PT10M\nRRULE:FREQ=HOURLY\nSUMMARY:hourly", zones=""), MAX_OCCURRENCES,
     r"its events occur more than 3000 times between 2025-12-03 and 2031-12-08 \(event 'hourly' passed it; a "
     r"calendar holds at most 2000 dates and 1000 windows\)"),
    # Daily for a century that ended before the horizon: nothing to keep, but all of it to walk
    (ics("DTSTART;VALUE=DATE:19000101\nRRULE:FREQ=DAILY;UNTIL=19991231\nSUMMARY:old", zones=""), MAX_RECURRENCES,
     r"its events repeat more than 20000 times from their starts to 2031-12-08 \(event 'old' passed it\)"),
    # A zone whose offset changes every month
    (ics("DTSTART:20261204T090000Z\nDURATION:PT1H\nSUMMARY:meeting",
         zones=zone("FREQ=YEARLY;BYMONTH=1,2,3,4,5,6,7,8,9,10,11,12")), MAX_ZONE_CHANGES + 1,
     "time zone 'Spin' changes its offset more than 1500 times up to the year 2200"),
])
def test_a_rule_with_too_many_instances_is_walked_up_to_the_limit_and_no_further(
        walked: list[datetime], text: str, walks: int, message: str) -> None:
    with pytest.raises(InvalidSpec, match=message):
        parse_ics(text, now=NOW)
    assert len(walked) == walks


def test_a_read_past_its_time_budget_is_refused() -> None:
    ticks = iter(range(10_000))  # a second a step
    with pytest.raises(InvalidSpec, match="took more than 5 s to read") as caught:
        parse_ics(ics("DTSTART;VALUE=DATE:20000101\nRRULE:FREQ=YEARLY\nSUMMARY:New year"), now=NOW,
                  elapsed=lambda: float(next(ticks)), budget_s=5)
    assert caught.value.field == "ics"
    # The same file within its budget
    assert len(parse_ics(ics("DTSTART;VALUE=DATE:20000101\nRRULE:FREQ=YEARLY\nSUMMARY:New year"), now=NOW,
                         elapsed=lambda: 0.0, budget_s=5).dates) == 6


def test_a_zone_as_outlook_writes_it_and_a_weekly_meeting_in_it_are_read() -> None:
    found = parse_ics(ics("DTSTART;TZID=W. Europe Standard Time:20261207T090000\n"
                          "DTEND;TZID=W. Europe Standard Time:20261207T100000\n"
                          "RRULE:FREQ=WEEKLY;INTERVAL=2;BYDAY=MO;COUNT=3\nSUMMARY:standup", zones=OUTLOOK), now=NOW)
    assert found.windows == ["2026-12-07T08:00:00+00:00/2026-12-07T09:00:00+00:00",
                             "2026-12-21T08:00:00+00:00/2026-12-21T09:00:00+00:00",
                             "2027-01-04T08:00:00+00:00/2027-01-04T09:00:00+00:00"]

"""Calendar membership as a table: dates, rules, weekly and daily windows, spans, in their zones and across DST;
the validation of what a calendar may hold; and `next_change`, which the year check and the previews jump by."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jetcron.core.errors import InvalidSpec
from jetcron.core.timing.calendar_time import compile_calendar
from jetcron.core.timing.calendars import CalendarRule, CalendarSpec, check_job_calendar_names, validate_calendar


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


def cal(tz: str = "UTC", *, dates: tuple[str, ...] = (), rules: tuple[str, ...] = (),
        windows: tuple[str, ...] = ()) -> CalendarSpec:
    return CalendarSpec(name="c", tz=tz, dates=[date.fromisoformat(d) for d in dates],
                        rules=[CalendarRule(r) for r in rules], windows=list(windows))


NY, BERLIN = "America/New_York", "Europe/Berlin"
CASES = [
    # A date is midnight to midnight in the calendar's zone (New York is UTC-5 in December).
    ("date: the evening before, in its zone", cal(NY, dates=("2026-12-25",)), "2026-12-25T04:59:59Z", False),
    ("date: its first instant", cal(NY, dates=("2026-12-25",)), "2026-12-25T05:00:00Z", True),
    ("date: its last second", cal(NY, dates=("2026-12-25",)), "2026-12-26T04:59:59Z", True),
    ("date: the next day", cal(NY, dates=("2026-12-25",)), "2026-12-26T05:00:00Z", False),
    # A 23-hour day (Berlin springs forward on 2026-03-29): still the whole of it.
    ("short day: local midnight (CET)", cal(BERLIN, dates=("2026-03-29",)), "2026-03-28T23:00:00Z", True),
    ("short day: 23:59 CEST", cal(BERLIN, dates=("2026-03-29",)), "2026-03-29T21:59:00Z", True),
    ("short day: the next midnight", cal(BERLIN, dates=("2026-03-29",)), "2026-03-29T22:00:00Z", False),
    # Rules, read on the zone's clock: Friday 23:30 in Tokyo is Friday 14:30 UTC; Saturday 00:30 there is Friday UTC.
    ("weekdays: Friday in Tokyo", cal("Asia/Tokyo", rules=("weekdays",)), "2026-12-04T14:30:00Z", True),
    ("weekdays: Saturday in Tokyo, Friday in UTC", cal("Asia/Tokyo", rules=("weekdays",)), "2026-12-04T15:30:00Z",
     False),
    ("weekends: Saturday in Tokyo", cal("Asia/Tokyo", rules=("weekends",)), "2026-12-04T15:30:00Z", True),
    ("weekends: Monday", cal(rules=("weekends",)), "2026-12-07T00:00:00Z", False),
    # A weekly window across the weekend, in Berlin (UTC+1 in December).
    ("weekly: Friday 15:59", cal(BERLIN, windows=("fri 16:00-mon 08:00",)), "2026-12-04T14:59:00Z", False),
    ("weekly: Friday 16:00", cal(BERLIN, windows=("fri 16:00-mon 08:00",)), "2026-12-04T15:00:00Z", True),
    ("weekly: Sunday noon", cal(BERLIN, windows=("fri 16:00-mon 08:00",)), "2026-12-06T11:00:00Z", True),
    ("weekly: Monday 07:59", cal(BERLIN, windows=("fri 16:00-mon 08:00",)), "2026-12-07T06:59:00Z", True),
    ("weekly: Monday 08:00", cal(BERLIN, windows=("fri 16:00-mon 08:00",)), "2026-12-07T07:00:00Z", False),
    ("weekly: Wednesday", cal(BERLIN, windows=("friday 16:00 - monday 08:00",)), "2026-12-09T12:00:00Z", False),
    # A daily window across midnight.
    ("daily: 23:00", cal(windows=("22:00-06:00",)), "2026-12-09T23:00:00Z", True),
    ("daily: 05:59", cal(windows=("22:00-06:00",)), "2026-12-10T05:59:59Z", True),
    ("daily: 06:00", cal(windows=("22:00-06:00",)), "2026-12-10T06:00:00Z", False),
    # Both passes of a fall-back fold read 01:30 on the wall (New York, 2026-11-01).
    ("fold: the first 01:30 (EDT)", cal(NY, windows=("01:00-02:00",)), "2026-11-01T05:30:00Z", True),
    ("fold: the second 01:30 (EST)", cal(NY, windows=("01:00-02:00",)), "2026-11-01T06:30:00Z", True),
    ("fold: 02:00 EST", cal(NY, windows=("01:00-02:00",)), "2026-11-01T07:00:00Z", False),
    # A spring-forward gap's wall times never occur: a window inside it holds no instant that day.
    ("gap: 01:59 EST", cal(NY, windows=("02:00-03:00",)), "2026-03-08T06:59:00Z", False),
    ("gap: 03:00 EDT", cal(NY, windows=("02:00-03:00",)), "2026-03-08T07:00:00Z", False),
    # Spans: with an offset they are absolute; without, wall time in the zone (this one spans the gap).
    ("span: its start", cal(windows=("2026-12-24T00:00Z/2026-12-27T00:00Z",)), "2026-12-24T00:00:00Z", True),
    ("span: its end", cal(windows=("2026-12-24T00:00Z/2026-12-27T00:00Z",)), "2026-12-27T00:00:00Z", False),
    ("span: an offset other than UTC", cal(windows=("2026-12-24T00:00+01:00/2026-12-24T01:00+01:00",)),
     "2026-12-23T23:30:00Z", True),
    ("wall span: 01:00 EST", cal(NY, windows=("2026-03-08T01:00/2026-03-08T04:00",)), "2026-03-08T06:00:00Z", True),
    ("wall span: 03:30 EDT", cal(NY, windows=("2026-03-08T01:00/2026-03-08T04:00",)), "2026-03-08T07:30:00Z", True),
    ("wall span: 04:00 EDT", cal(NY, windows=("2026-03-08T01:00/2026-03-08T04:00",)), "2026-03-08T08:00:00Z", False),
    ("wall span: a date alone is its midnight", cal(windows=("2026-12-24/2026-12-25",)), "2026-12-24T23:59:59Z", True),
]


@pytest.mark.parametrize(("spec", "at", "inside"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_membership(spec: CalendarSpec, at: str, inside: bool) -> None:
    validate_calendar(spec)
    assert compile_calendar(spec).contains(utc(at)) is inside


CHANGES = [
    ("the next local midnight", cal(NY, dates=("2026-12-25",)), "2026-12-25T12:00:00Z", "2026-12-26T05:00:00Z"),
    ("a weekly window's end", cal(BERLIN, windows=("fri 16:00-mon 08:00",)), "2026-12-05T12:00:00Z",
     "2026-12-07T07:00:00Z"),
    ("a daily window's start", cal(windows=("22:00-06:00",)), "2026-12-09T12:00:00Z", "2026-12-09T22:00:00Z"),
    # The wall clock itself moves at a DST transition: that comes before Sunday 12:00 EST.
    ("a DST transition first", cal(NY, windows=("sun 12:00-sun 13:00",)), "2026-10-31T12:00:00Z",
     "2026-11-01T06:00:00Z"),
    ("an absolute span's start", cal(windows=("2026-12-24T00:00Z/2026-12-27T00:00Z",)), "2026-12-01T00:00:00Z",
     "2026-12-24T00:00:00Z"),
]


@pytest.mark.parametrize(("spec", "at", "change"), [c[1:] for c in CHANGES], ids=[c[0] for c in CHANGES])
def test_next_change(spec: CalendarSpec, at: str, change: str) -> None:
    assert compile_calendar(spec).next_change(utc(at)) == utc(change)


def test_a_span_in_the_past_never_changes_again() -> None:
    spec = cal(windows=("2026-12-24T00:00Z/2026-12-27T00:00Z",))
    assert compile_calendar(spec).next_change(utc("2027-01-01T00:00:00Z")) is None


MIXED = [
    cal(NY, dates=("2026-11-01", "2026-11-03"), windows=("fri 16:00-mon 08:00", "01:00-02:00")),
    cal("Australia/Lord_Howe", rules=("weekends",), windows=("2026-10-04T01:45/2026-10-04T02:45",)),
    cal(BERLIN, windows=("sun 02:30-sun 03:30", "2026-10-25T02:00+01:00/2026-10-25T05:00+01:00")),
]


@settings(max_examples=150, deadline=None, derandomize=True)
@given(which=st.integers(0, len(MIXED) - 1), offset=st.integers(0, 400 * 86400), probes=st.lists(
    st.floats(0, 1), min_size=1, max_size=8))
def test_nothing_changes_before_next_change(which: int, offset: int, probes: list[float]) -> None:
    # Over DST transitions in three zones (one that moves by 30 minutes): membership is constant on
    # [at, next_change), which is what lets the year check and the previews jump over it.
    compiled = compile_calendar(MIXED[which])
    at = utc("2026-01-01T00:00:00Z") + timedelta(seconds=offset)
    change = compiled.next_change(at)
    assert change is None or change > at
    end = change or at + timedelta(days=30)
    inside = compiled.contains(at)
    for p in [*probes, 1.0]:
        probe = min(at + (end - at) * p, end - timedelta(microseconds=1))
        assert compiled.contains(probe) is inside, (at, probe, change)


BAD = [
    ("an empty calendar", cal(), "calendar", "is empty"),
    ("a name with a dot", CalendarSpec(name="a.b", rules=[CalendarRule.WEEKDAYS]), "name", "no dots"),
    ("a name with a wildcard", CalendarSpec(name="a*", rules=[CalendarRule.WEEKDAYS]), "name", "wildcards"),
    ("an unknown zone", cal("Mars/Olympus", rules=("weekdays",)), "tz", "unknown time zone"),
    ("a date out of range", cal(dates=("1999-12-31",)), "dates[0]", "between the years 2000 and 2200"),
    ("a date twice", cal(dates=("2026-12-25", "2026-12-25")), "dates[1]", "more than once"),
    ("every day", cal(rules=("weekdays", "weekends")), "rules", "every day"),
    ("a window with no form", cal(windows=("whenever",)), "windows[0]", "must be one of"),
    ("a window's day", cal(windows=("fry 16:00-mon 08:00",)), "windows[0]", "is not a day"),
    ("a window's time", cal(windows=("fri 25:00-mon 08:00",)), "windows[0]", "is not a time of day"),
    ("a window that ends where it starts", cal(windows=("08:00-08:00",)), "windows[0]", "starts where it ends"),
    ("a span backwards", cal(windows=("2026-12-27T00:00Z/2026-12-24T00:00Z",)), "windows[0]", "before its end"),
    ("a span half with an offset", cal(windows=("2026-12-24T00:00Z/2026-12-27T00:00",)), "windows[0]",
     "both ends"),
    ("a span's instant", cal(windows=("2026-12-24T00:00Z/soon",)), "windows[0]", "not an ISO 8601"),
    ("a span out of range", cal(windows=("1990-01-01T00:00Z/2026-12-27T00:00Z",)), "windows[0]", "2000 and 2200"),
]


@pytest.mark.parametrize(("spec", "field", "message"), [c[1:] for c in BAD], ids=[c[0] for c in BAD])
def test_bad_calendars_are_refused_naming_the_field(spec: CalendarSpec, field: str, message: str) -> None:
    with pytest.raises(InvalidSpec, match=message) as caught:
        validate_calendar(spec)
    assert caught.value.field == field


def test_too_many_dates_and_windows() -> None:
    days = [date(2026, 1, 1) + timedelta(days=i) for i in range(2001)]
    with pytest.raises(InvalidSpec, match="more than 2000 dates"):
        validate_calendar(CalendarSpec(name="c", dates=days))
    with pytest.raises(InvalidSpec, match="more than 1000 windows"):
        validate_calendar(CalendarSpec(name="c", windows=[f"{h % 24:02d}:00-{h % 24:02d}:30" for h in range(1001)]))


@pytest.mark.parametrize(("exclude", "only", "field", "message"), [
    (["us.holidays"], [], "exclude_calendars[0]", "no dots"),
    (["a", "a"], [], "exclude_calendars[1]", "more than once"),
    (["a"], ["b", "a"], "only_calendars[1]", "also in exclude_calendars"),
    ([f"c{i}" for i in range(17)], [], "exclude_calendars", "more than 16"),
])
def test_a_jobs_calendar_names(exclude: list[str], only: list[str], field: str, message: str) -> None:
    with pytest.raises(InvalidSpec, match=message) as caught:
        check_job_calendar_names(exclude, only)
    assert caught.value.field == field

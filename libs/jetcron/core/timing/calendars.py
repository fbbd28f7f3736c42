"""Named calendars: a tenant's sets of days and hours that jobs skip (exclude_calendars) or keep to
(only_calendars). The models and their validation; membership is jetcron.core.timing.calendar_time. Pure."""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from datetime import UTC, date, datetime

import msgspec

from jetcron.core.errors import InvalidSpec
from jetcron.core.ids import JOB_NAME_RE, job_key
from jetcron.core.timing.schedule_text import check_instant, zone

__all__ = ["MAX_DATES", "MAX_JOB_CALENDARS", "MAX_WINDOWS", "CalendarRecord", "CalendarRule", "CalendarSpec", "Window",
           "check_job_calendar_names", "parse_window", "validate_calendar"]

MAX_DATES = 2000
"""Dates one calendar holds at most (five years of every day fit; an ICS import is bounded by it too)."""
MAX_WINDOWS = 1000
"""Windows one calendar holds at most (an ICS import's timed events become windows)."""
MAX_JOB_CALENDARS = 16
"""Calendars a job names at most, in each of exclude_calendars and only_calendars."""
MAX_DESCRIPTION = 500
_DAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_CLOCK = r"(\d{1,2}):(\d{2})"
_WEEKLY = re.compile(rf"^([a-z]+)\s+{_CLOCK}\s*-\s*([a-z]+)\s+{_CLOCK}$")
_DAILY = re.compile(rf"^{_CLOCK}\s*-\s*{_CLOCK}$")
WINDOW_FORMS = ("'DAY HH:MM-DAY HH:MM' (weekly, e.g. 'fri 16:00-mon 08:00'), 'HH:MM-HH:MM' (daily, e.g. "
                "'22:00-06:00') or 'START/END' (ISO 8601, e.g. '2026-12-24T00:00/2026-12-27T00:00')")


class CalendarRule(enum.StrEnum):
    WEEKDAYS = "weekdays"
    """Monday to Friday, in the calendar's zone."""
    WEEKENDS = "weekends"
    """Saturday and Sunday, in the calendar's zone."""


class CalendarSpec(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, gc=False):
    """A calendar as a user writes it: an instant is in it when any of its dates, rules or windows covers it."""

    name: str
    """1-63 letters, digits, '-' or '_' (a KV key and a subject token: no dots, spaces or wildcards)."""
    tz: str = "UTC"
    """IANA zone the dates, rules and windows without an offset are read in."""
    dates: list[date] = msgspec.field(default_factory=list)
    """Whole days (YYYY-MM-DD), midnight to midnight in the calendar's zone."""
    rules: list[CalendarRule] = msgspec.field(default_factory=list)
    """Days by rule: `weekdays` (Monday to Friday) or `weekends`."""
    windows: list[str] = msgspec.field(default_factory=list)
    """Spans of time, each as written: weekly 'fri 16:00-mon 08:00', daily '22:00-06:00', or explicit
    'START/END' in ISO 8601 (with an offset, an absolute span; without, wall time in the calendar's zone).
    Each includes its start and excludes its end."""
    description: str = ""
    tenant: str = "default"
    """Set by the caller's credential (a tenant's), or named by the admin."""

    @property
    def key(self) -> str:
        """Where the calendar is stored: keyed as jobs are (ids.job_key)."""
        return job_key(self.tenant, self.name)


class CalendarRecord(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """A stored calendar: its spec and version (each change makes a new one; the bucket keeps the history)."""

    spec: CalendarSpec
    version: int = 1
    created_at: datetime
    updated_at: datetime
    imported_events: int = 0
    """Events the last ICS import of this calendar turned into dates and windows (0: none imported)."""


@dataclass(frozen=True, slots=True)
class Window:
    """A parsed window: `weekly` and `daily` hold seconds of the week or day (end may be below start: it wraps);
    `span` holds its instants, aware (absolute) or naive (wall time in the calendar's zone)."""

    kind: str
    start_s: int = 0
    end_s: int = 0
    start: datetime | None = None
    end: datetime | None = None


def _day(word: str, text: str, field: str) -> int:
    for number, name in enumerate(_DAYS):
        if len(word) >= 3 and name.startswith(word):
            return number
    raise InvalidSpec(field, text, f"{word!r} is not a day (mon, tue, wed, thu, fri, sat, sun)")


def _clock(hours: str, minutes: str, text: str, field: str) -> int:
    h, m = int(hours), int(minutes)
    if h > 23 or m > 59:
        raise InvalidSpec(field, text, f"{hours}:{minutes} is not a time of day (00:00 to 23:59)")
    return h * 3600 + m * 60


def _instant(part: str, text: str, field: str) -> datetime:
    try:
        parsed = datetime.fromisoformat(part.strip().replace("Z", "+00:00"))
    except ValueError:
        raise InvalidSpec(field, text, f"{part.strip()!r} is not an ISO 8601 date or time; a window is one of "
                          f"{WINDOW_FORMS}") from None
    check_instant(parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC), field)
    return parsed.astimezone(UTC) if parsed.tzinfo is not None else parsed


def parse_window(text: str, field: str = "windows") -> Window:
    """One window as written, or InvalidSpec naming the field and saying which forms there are."""
    cleaned = " ".join(text.strip().lower().split()) if isinstance(text, str) else ""
    if not cleaned or len(cleaned) > 100:
        raise InvalidSpec(field, text, f"must be one of {WINDOW_FORMS}")
    if "/" in cleaned:
        first, _, last = text.strip().partition("/")
        start, end = _instant(first, text, field), _instant(last, text, field)
        if (start.tzinfo is None) != (end.tzinfo is None):
            raise InvalidSpec(field, text, "give both ends with a UTC offset, or both without (wall time in the "
                              "calendar's zone)")
        if start >= end:
            raise InvalidSpec(field, text, "its start must come before its end")
        return Window(kind="span", start=start, end=end)
    weekly = _WEEKLY.fullmatch(cleaned)
    if weekly:
        a, b = _day(weekly[1], text, field), _day(weekly[4], text, field)
        start_s = a * 86400 + _clock(weekly[2], weekly[3], text, field)
        end_s = b * 86400 + _clock(weekly[5], weekly[6], text, field)
        kind = "weekly"
    elif daily := _DAILY.fullmatch(cleaned):
        start_s, end_s = _clock(daily[1], daily[2], text, field), _clock(daily[3], daily[4], text, field)
        kind = "daily"
    else:
        raise InvalidSpec(field, text, f"must be one of {WINDOW_FORMS}")
    if start_s == end_s:
        raise InvalidSpec(field, text, "starts where it ends: it would cover nothing (or, read the other way, "
                          "everything); use a rule or two windows")
    return Window(kind=kind, start_s=start_s, end_s=end_s)


def _name(name: object, field: str) -> None:
    if not isinstance(name, str) or not JOB_NAME_RE.fullmatch(name):
        raise InvalidSpec(field, name, "must be 1-63 letters, digits, '-' or '_', starting with a letter or digit "
                          "(no dots, spaces or wildcards: it is a key and a subject token)")


def validate_calendar(spec: CalendarSpec) -> None:
    """Raise InvalidSpec for the first bad field: the name, the zone, bad or too many dates, bad windows, an empty
    calendar, a date or window given twice."""
    _name(spec.name, "name")
    _name(spec.tenant, "tenant")
    zone(spec.tz, "tz")
    if len(spec.description) > MAX_DESCRIPTION or "\x00" in spec.description:
        raise InvalidSpec("description", spec.description[:40], f"must be at most {MAX_DESCRIPTION} characters "
                          "without NUL")
    if len(spec.dates) > MAX_DATES:
        raise InvalidSpec("dates", f"{len(spec.dates)} dates", f"more than {MAX_DATES} dates")
    if len(spec.windows) > MAX_WINDOWS:
        raise InvalidSpec("windows", f"{len(spec.windows)} windows", f"more than {MAX_WINDOWS} windows")
    seen: set[date] = set()
    for i, day in enumerate(spec.dates):
        if not 2000 <= day.year <= 2200:
            raise InvalidSpec(f"dates[{i}]", day.isoformat(), "must lie between the years 2000 and 2200")
        if day in seen:
            raise InvalidSpec(f"dates[{i}]", day.isoformat(), "is listed more than once")
        seen.add(day)
    if len(set(spec.rules)) != len(spec.rules):
        raise InvalidSpec("rules", [r.value for r in spec.rules], "a rule is listed more than once")
    if set(spec.rules) == set(CalendarRule):
        raise InvalidSpec("rules", [r.value for r in spec.rules], "weekdays and weekends together cover every day: "
                          "a calendar of everything")
    texts: set[str] = set()
    for i, text in enumerate(spec.windows):
        parse_window(text, f"windows[{i}]")
        if text in texts:
            raise InvalidSpec(f"windows[{i}]", text, "is listed more than once")
        texts.add(text)
    if not (spec.dates or spec.rules or spec.windows):
        raise InvalidSpec("calendar", spec.name, "is empty: give dates, rules, windows or an ICS file")


def check_job_calendar_names(exclude: list[str], only: list[str]) -> None:
    """A job's calendar names: well formed, each once, none both excluded and required (no occurrence could
    run). Whether they exist is the API's to say (it reads them)."""
    for field, names in (("exclude_calendars", exclude), ("only_calendars", only)):
        if len(names) > MAX_JOB_CALENDARS:
            raise InvalidSpec(field, f"{len(names)} names", f"more than {MAX_JOB_CALENDARS} calendars")
        for i, name in enumerate(names):
            _name(name, f"{field}[{i}]")
            if names.index(name) != i:
                raise InvalidSpec(f"{field}[{i}]", name, "is listed more than once")
    for i, name in enumerate(only):
        if name in exclude:
            raise InvalidSpec(f"only_calendars[{i}]", name, "is also in exclude_calendars: no occurrence could run "
                              "(it must be inside the calendar and outside it at once)")

"""Dates and windows from an iCalendar (RFC 5545) file: what `calendars create --ics FILE` imports. Pure: text in,
values out (the `icalendar` library parses, `recurring-ical-events` expands recurrences).

- An all-day event (DTSTART;VALUE=DATE) covers its days, DTEND excluded (one day without DTEND): `dates`.
- A timed event covers [DTSTART, DTEND) (DURATION counts as its end): a window `START/END`, with the offset its
  TZID or UTC gave it, or without one for a floating time (then wall time in the calendar's zone). One that ends
  where it starts covers nothing and is left out.
- A recurring event (RRULE, RDATE, EXDATE, RECURRENCE-ID) is expanded from `PAST` before the import to `AHEAD`
  after it: import the file again to reach further. Cancelled events (STATUS:CANCELLED) are left out.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any

import icalendar
import recurring_ical_events

from jetcron.core.calendars import MAX_DATES, MAX_WINDOWS
from jetcron.core.errors import InvalidSpec

__all__ = ["AHEAD", "MAX_ICS_BYTES", "PAST", "IcsImport", "parse_ics"]

PAST = timedelta(days=366)
AHEAD = timedelta(days=5 * 366)
MAX_ICS_BYTES = 4 * 1024 * 1024
_DAY = timedelta(days=1)


@dataclass(frozen=True)
class IcsImport:
    dates: list[date]
    windows: list[str]
    events: int
    """Event occurrences taken (all-day and timed) within the horizon."""


def _bad(field: str, text: str, problem: str) -> InvalidSpec:
    excerpt = text.strip().splitlines()[0][:60] if text.strip() else text[:60]
    return InvalidSpec(field, excerpt, problem)


def _expand(text: str, now: datetime, field: str) -> list[Any]:
    try:
        calendar = icalendar.Calendar.from_ical(text)
    except Exception as exc:  # the file is the user's: anything the parser cannot take is a malformed file
        raise _bad(field, text, f"not a valid iCalendar file: {exc}") from None
    if not isinstance(calendar, icalendar.Calendar):
        raise _bad(field, text, "not a valid iCalendar file: it must hold one VCALENDAR")
    if not calendar.walk("VEVENT"):
        raise _bad(field, text, "holds no events (VEVENT): nothing to import")
    start, end = (now - PAST).date(), (now + AHEAD).date()
    try:
        return list(recurring_ical_events.of(calendar).between(start, end))
    except Exception as exc:
        raise _bad(field, text, f"not a valid iCalendar file: an event cannot be read ({exc})") from None


def _moment(event: Any, name: str) -> date | datetime | None:
    prop = event.get(name)
    value = getattr(prop, "dt", None)
    return value if isinstance(value, (date, datetime)) else None


def parse_ics(text: str, *, now: datetime, field: str = "ics") -> IcsImport:
    """The days and windows of an iCalendar file's events (module docstring), or InvalidSpec naming `field`:
    a malformed file, one without events, one that yields more dates or windows than a calendar holds."""
    if not isinstance(text, str) or len(text.encode("utf-8", "replace")) > MAX_ICS_BYTES or "\x00" in text:
        raise InvalidSpec(field, f"{len(text) if isinstance(text, str) else text!r}",
                          f"must be the text of an iCalendar file of at most {MAX_ICS_BYTES} bytes")
    days: set[date] = set()
    windows: dict[str, None] = {}
    taken = 0
    for event in _expand(text, now, field):
        if str(event.get("STATUS", "")).upper() == "CANCELLED":
            continue
        start, end = _moment(event, "DTSTART"), _moment(event, "DTEND")
        if start is None:
            raise _bad(field, text, f"an event has no DTSTART (UID {event.get('UID', '?')})")
        if not isinstance(start, datetime):  # all day
            last = end if isinstance(end, date) and not isinstance(end, datetime) and end > start else start + _DAY
            day = start
            while day < last and len(days) <= MAX_DATES:
                days.add(day)
                day += _DAY
        else:
            finish = end if isinstance(end, datetime) else start
            if (start.tzinfo is None) != (finish.tzinfo is None) or finish <= start:
                continue
            if start.tzinfo is not None:
                windows[f"{start.astimezone(UTC).isoformat()}/{finish.astimezone(UTC).isoformat()}"] = None
            else:
                windows[f"{start.isoformat()}/{finish.isoformat()}"] = None
        taken += 1
        if len(days) > MAX_DATES or len(windows) > MAX_WINDOWS:
            raise _bad(field, text, f"yields more than {MAX_DATES} dates or {MAX_WINDOWS} windows between "
                       f"{(now - PAST).date()} and {(now + AHEAD).date()}: split it, or keep fewer events")
    return IcsImport(dates=sorted(days), windows=list(windows), events=taken)

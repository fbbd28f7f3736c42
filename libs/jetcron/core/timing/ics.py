"""Dates and windows from an iCalendar (RFC 5545) file: what `calendars create --ics FILE` imports. Pure: text in,
values out (the `icalendar` library parses, `recurring-ical-events` expands recurrences).

- An all-day event (DTSTART;VALUE=DATE) covers its days, DTEND excluded (one day without DTEND): `dates`.
- A timed event covers [DTSTART, DTEND) (DURATION counts as its end): a window `START/END`, with the offset its
  TZID or UTC gave it, or without one for a floating time (then wall time in the calendar's zone). One that ends
  where it starts covers nothing and is left out.
- A recurring event (RRULE, RDATE, EXDATE, RECURRENCE-ID) is expanded from `PAST` before the import to `AHEAD`
  after it: import the file again to reach further. Cancelled events (STATUS:CANCELLED) are left out.

A file is read within bounds, checked before anything is expanded (`_Bounds`): the expansion materialises every
occurrence, and `dateutil` walks a rule period by period from its DTSTART (to the year 9999 for a rule that stops
matching), none of which can be interrupted. So:

- rules finer than HOURLY are refused by name: FREQ=SECONDLY or MINUTELY, and BYSECOND or BYMINUTE with more than
  one value (an HOURLY rule with BYMINUTE=0,30 is a MINUTELY one);
- an HOURLY, DAILY or WEEKLY rule narrows its days by BYDAY alone, and an HOURLY or DAILY one with INTERVAL above
  1 not at all: BYMONTH, BYMONTHDAY, BYYEARDAY, BYWEEKNO and BYSETPOS (and BYDAY with an interval) need MONTHLY or
  YEARLY, where a rule that matches nothing is walked a month or a year per step, not a day;
- a time zone the file defines (VTIMEZONE) changes its offset by YEARLY rules only, at most `MAX_ZONE_CHANGES`
  times up to the year 2200, and no event names an instant later than that (placing an instant in such a zone
  walks its changes up to it);
- the rules are walked lazily, one instance at a time, before the expansion: more than `MAX_RECURRENCES` instances
  from their DTSTARTs, or more than `MAX_OCCURRENCES` within the horizon, and the file is refused naming the event
  that passed the limit, with nothing expanded;
- given the time `elapsed`, the read has `budget_s` seconds: past them it is refused at its next step (the walk's steps,
  and each occurrence taken).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

import icalendar
import recurring_ical_events
from dateutil.rrule import rrulestr
from icalendar.prop import vRecur

from jetcron.core.errors import InvalidSpec
from jetcron.core.timing.calendars import MAX_DATES, MAX_WINDOWS

__all__ = ["AHEAD", "BUDGET_S", "MAX_ICS_BYTES", "MAX_OCCURRENCES", "MAX_RECURRENCES", "MAX_ZONE_CHANGES", "PAST",
           "IcsImport", "parse_ics"]

PAST = timedelta(days=366)
AHEAD = timedelta(days=5 * 366)
MAX_ICS_BYTES = 4 * 1024 * 1024
MAX_OCCURRENCES = MAX_DATES + MAX_WINDOWS
"""Event occurrences a file may have within the horizon: at most a calendar's dates and windows together."""
MAX_RECURRENCES = 20_000
"""Instances the file's events may have from their DTSTARTs to the horizon's end, all together (what expanding them
walks: a daily rule from 1980 is 19,000)."""
MAX_ZONE_CHANGES = 1500
"""Offset changes a time zone the file defines may have up to the year 2200 (one defined from 1601, as Outlook writes
them, has about 1200): placing an instant in it walks them."""
BUDGET_S = 10.0
"""Seconds a read may take when the caller gives the time elapsed (the api does: it reads files off its event loop)."""
_DAY = timedelta(days=1)
_LATEST = datetime(2201, 1, 1)
"""No instant a file names may lie past the year 2200, the last a calendar's dates and windows may reach."""
_FINER_THAN_HOURLY = ("SECONDLY", "MINUTELY")
_KNOWN_PARTS = frozenset({"FREQ", "UNTIL", "COUNT", "INTERVAL", "BYSECOND", "BYMINUTE", "BYHOUR", "BYDAY",
                          "BYMONTHDAY", "BYYEARDAY", "BYWEEKNO", "BYMONTH", "BYSETPOS", "WKST"})
_COARSE = ("MONTHLY", "YEARLY")
_DAY_PARTS = ("BYMONTH", "BYMONTHDAY", "BYYEARDAY", "BYWEEKNO", "BYSETPOS")


@dataclass(frozen=True)
class IcsImport:
    dates: list[date]
    windows: list[str]
    events: int
    """Event occurrences taken (all-day and timed) within the horizon."""


def _bad(field: str, text: str, problem: str) -> InvalidSpec:
    excerpt = text.strip().splitlines()[0][:60] if text.strip() else text[:60]
    return InvalidSpec(field, excerpt, problem)


def _value(event: Any, name: str, field: str) -> Any:
    prop = event.get(name)
    try:
        return getattr(prop, "dt", None)
    except Exception as exc:  # icalendar keeps a property it could not read, and raises once it is used
        raise InvalidSpec(field, str(event.get("UID", name))[:60], f"not a valid iCalendar file: {exc}") from None


def _moment(event: Any, name: str, field: str) -> date | datetime | None:
    value = _value(event, name, field)
    return value if isinstance(value, (date, datetime)) else None


def _naive(value: date | datetime) -> datetime:
    """Wall time, without looking the zone up: the bounds are counted a day wide, so its offset does not matter
    (and a zone the file defines is not consulted before it is checked)."""
    return value.replace(tzinfo=None) if isinstance(value, datetime) else datetime.combine(value, time())


def _props(component: Any, name: str) -> list[Any]:
    found = component.get(name)
    return [] if found is None else found if isinstance(found, list) else [found]


def _ical(rule: Any) -> str:
    return f"RRULE:{rule.to_ical().decode()}"


def _label(component: Any) -> str:
    for name in ("SUMMARY", "UID", "TZID"):
        if component.get(name):
            return str(component.get(name))[:60]
    return "?"


@dataclass
class _Bounds:
    """The walk of a file's rules before anything is expanded (module docstring): refuses, naming `field` and the
    event or zone, what passes a bound."""

    field: str
    start: datetime
    end: datetime
    tick: Callable[[], None]
    recurrences: int = 0
    occurrences: int = 0
    zone_changes: dict[str, int] = dataclasses.field(default_factory=dict)

    def refuse(self, value: str, problem: str) -> InvalidSpec:
        return InvalidSpec(self.field, value, problem)

    def rule(self, prop: Any, what: str, *, zone: bool) -> Any:
        """An RRULE's parts, refused by name where they are finer than hourly, or unbounded to walk."""
        if not isinstance(prop, vRecur):
            why = getattr(prop, "parse_error", None)
            raise self.refuse(f"RRULE:{str(prop)[:100]}", f"{what} has an RRULE that cannot be read"
                              f"{f' ({why})' if why else ''}: not a valid iCalendar file")
        shown = _ical(prop)
        unknown = sorted(set(prop) - _KNOWN_PARTS)
        if unknown:
            raise self.refuse(shown, f"{what} has rule parts RFC 5545 does not define ({', '.join(unknown)})")
        freq = str(prop.get("FREQ", ["?"])[0]).upper()
        interval = prop.get("INTERVAL", [1])[0]
        if not isinstance(interval, int) or interval < 1:
            # dateutil steps by it: at 0 a rule that matches nothing loops for ever, not even to the year 9999
            raise self.refuse(shown, f"{what} has INTERVAL={interval}: it must be 1 or more")
        if freq in _FINER_THAN_HOURLY:
            raise self.refuse(shown, f"{what} repeats {freq}; rules finer than HOURLY are refused")
        for part in ("BYSECOND", "BYMINUTE"):
            if len(prop.get(part, ())) > 1:
                raise self.refuse(shown, f"{what} repeats more than once an hour ({part} has "
                                  f"{len(prop[part])} values); rules finer than HOURLY are refused")
        if zone and freq != "YEARLY":
            raise self.refuse(shown, f"{what} changes its offset {freq}; a time zone's rules must be YEARLY")
        if freq not in _COARSE:
            narrowed = [p for p in _DAY_PARTS if p in prop]
            if narrowed:
                raise self.refuse(shown, f"{what} repeats {freq} narrowed by {', '.join(narrowed)}: such a rule may "
                                  "match no day for centuries, walked day by day; use FREQ=MONTHLY or YEARLY "
                                  "(e.g. FREQ=YEARLY;BYMONTH=12;BYDAY=MO,TU,WE,TH,FR,SA,SU for every day of December)")
            if freq != "WEEKLY" and interval > 1 and "BYDAY" in prop:
                raise self.refuse(shown, f"{what} repeats every {interval} {freq} periods narrowed by BYDAY: such a "
                                  "rule may match no day at all; use FREQ=WEEKLY with BYDAY")
        return prop

    def walk(self, prop: Any, start: date | datetime, what: str, *, ahead: timedelta,
             count: Callable[[datetime, str], None]) -> None:
        """Every instance of one rule from `start` to just past the horizon's end (`ahead` further for an event
        moved THISANDFUTURE), one at a time through `count`: dateutil yields them lazily, so a rule stops being
        walked at the instance that passes a bound."""
        self.tick()  # a rule that stops matching yields nothing while dateutil walks it to the year 9999
        until = prop.get("UNTIL")
        parts = vRecur({k: v for k, v in prop.items() if k != "UNTIL" and not (k == "COUNT" and int(v[0]) <= 0)})
        last = self.end + _DAY + ahead
        if until:
            last = min(last, _naive(until[0]) + _DAY)
        try:
            instances: Iterable[datetime] = rrulestr(_ical(parts)[len("RRULE:"):], dtstart=_naive(start))
            for at in instances:
                if at > last:
                    return
                count(at, what)
        except InvalidSpec:
            raise
        except Exception as exc:  # the rule is the user's: one dateutil cannot take is a malformed file
            raise self.refuse(_ical(prop),
                              f"{what} has an RRULE that cannot be read ({exc}): not a valid iCalendar file") from None

    def event(self, at: datetime, what: str) -> None:
        self.tick()
        self.recurrences += 1
        if self.recurrences > MAX_RECURRENCES:
            raise self.refuse(what, f"its events repeat more than {MAX_RECURRENCES} times from their starts to "
                              f"{self.end.date()} ({what} passed it): start them later, or end them (UNTIL, COUNT)")
        if self.start - _DAY <= at <= self.end + _DAY:
            self.occurrences += 1
            if self.occurrences > MAX_OCCURRENCES:
                raise self.refuse(what, f"its events occur more than {MAX_OCCURRENCES} times between "
                                  f"{self.start.date()} and {self.end.date()} ({what} passed it; a calendar holds "
                                  f"at most {MAX_DATES} dates and {MAX_WINDOWS} windows): split it, or keep fewer "
                                  "events")

    def zone_change(self, at: datetime, what: str) -> None:
        self.tick()
        changes = self.zone_changes[what] = self.zone_changes.get(what, 0) + 1
        if changes > MAX_ZONE_CHANGES:
            raise self.refuse(what, f"{what} changes its offset more than {MAX_ZONE_CHANGES} times up to the year "
                              f"{_LATEST.year - 1}: start its rules later")

    def check(self, calendar: Any) -> None:
        """Every rule's words first, then their walks; zones before events: an instant in a zone the file defines
        is placed by walking the zone's rules."""
        zones = [(f"time zone {_label(zone)!r}", part, _moment(part, "DTSTART", self.field),
                  # dateutil walks a zone's EXRULE beside its RRULE at each lookup
                  [self.rule(p, f"time zone {_label(zone)!r}", zone=True)
                   for p in [*_props(part, "RRULE"), *_props(part, "EXRULE")]])
                 for zone in calendar.walk("VTIMEZONE") for part in zone.subcomponents]
        events = []
        for event in calendar.walk("VEVENT"):
            what, start = f"event {_label(event)!r}", _moment(event, "DTSTART", self.field)
            if start is None:
                raise self.refuse(what, f"{what} has no DTSTART")
            self.instants(event, start, what)
            events.append((what, event, start, [self.rule(p, what, zone=False) for p in _props(event, "RRULE")]))
        for what, part, start, rules in zones:
            for rule in rules:
                if start is not None:
                    self.walk(rule, start, what, ahead=_LATEST - self.end, count=self.zone_change)
            for listed in _props(part, "RDATE"):
                for _ in getattr(listed, "dts", ()):
                    self.zone_change(self.start, what)
        ahead: dict[str, timedelta] = {}
        for _, event, start, _ in events:  # a modification for this and future occurrences moves the walk on
            moved = event.get("RECURRENCE-ID")
            if moved is not None and moved.params.get("RANGE", "").upper() == "THISANDFUTURE":
                by = _naive(_moment(event, "RECURRENCE-ID", self.field) or start) - _naive(start)
                uid = str(event.get("UID", ""))
                ahead[uid] = max(ahead.get(uid, timedelta(0)), by)
        for what, event, start, rules in events:
            self.event(_naive(start), what)
            for rule in rules:
                self.walk(rule, start, what, ahead=ahead.get(str(event.get("UID", "")), timedelta(0)),
                          count=self.event)
            for listed in _props(event, "RDATE"):
                for one in getattr(listed, "dts", ()):
                    value = one.dt[0] if isinstance(one.dt, tuple) else one.dt
                    if isinstance(value, (date, datetime)):
                        self.event(_naive(value), what)

    def instants(self, event: Any, start: date | datetime, what: str) -> None:
        """Every instant an event names lies before `_LATEST`: a calendar holds nothing later, and an instant in a
        zone the file defines is placed by walking the zone's rules up to it."""
        named: list[tuple[str, Any]] = [(n, _moment(event, n, self.field)) for n in ("DTSTART", "DTEND",
                                                                                      "RECURRENCE-ID")]
        spans = [(start, _value(event, "DURATION", self.field))]
        for name in ("RDATE", "EXDATE"):
            for listed in _props(event, name):
                for one in getattr(listed, "dts", ()):
                    value = one.dt if isinstance(one.dt, tuple) else (one.dt,)
                    named += [(name, v) for v in value if isinstance(v, (date, datetime))]
                    if len(value) == 2:  # a PERIOD: its start and its end or duration
                        spans.append(value)
        for begin, length in spans:
            if isinstance(begin, (date, datetime)) and isinstance(length, timedelta):
                try:
                    named.append(("DURATION", _naive(begin) + length))
                except OverflowError:
                    named.append(("DURATION", datetime.max))
        for name, moment in named:
            if moment is not None and _naive(moment) >= _LATEST:
                raise self.refuse(f"{name}:{_naive(moment).isoformat()}", f"{what} names an instant after the year "
                                  f"{_LATEST.year - 1} ({name}): a calendar holds nothing later")


def _calendar(text: str, field: str) -> Any:
    try:
        calendar = icalendar.Calendar.from_ical(text)
    except Exception as exc:  # the file is the user's: anything the parser cannot take is a malformed file
        raise _bad(field, text, f"not a valid iCalendar file: {exc}") from None
    if not isinstance(calendar, icalendar.Calendar):
        raise _bad(field, text, "not a valid iCalendar file: it must hold one VCALENDAR")
    if not calendar.walk("VEVENT"):
        raise _bad(field, text, "holds no events (VEVENT): nothing to import")
    return calendar


def _expand(calendar: Any, text: str, now: datetime, field: str) -> list[Any]:
    start, end = (now - PAST).date(), (now + AHEAD).date()
    try:
        return list(recurring_ical_events.of(calendar).between(start, end))
    except Exception as exc:
        raise _bad(field, text, f"not a valid iCalendar file: an event cannot be read ({exc})") from None


def parse_ics(text: str, *, now: datetime, field: str = "ics", elapsed: Callable[[], float] | None = None,
              budget_s: float = BUDGET_S) -> IcsImport:
    """The days and windows of an iCalendar file's events (module docstring), or InvalidSpec naming `field`:
    a malformed file, one without events, one past the bounds, one that yields more dates or windows than a
    calendar holds. `elapsed`: the seconds since the read was asked for (by a monotonic clock); once they pass
    `budget_s`, the read is refused at its next step."""
    if not isinstance(text, str) or len(text.encode("utf-8", "replace")) > MAX_ICS_BYTES or "\x00" in text:
        raise InvalidSpec(field, f"{len(text) if isinstance(text, str) else text!r}",
                          f"must be the text of an iCalendar file of at most {MAX_ICS_BYTES} bytes")
    def tick() -> None:
        if elapsed is not None and elapsed() > budget_s:
            raise InvalidSpec(field, f"{len(text)} characters", f"took more than {budget_s:g} s to read: split it, "
                              "or keep fewer events")

    calendar = _calendar(text, field)
    tick()
    _Bounds(field, datetime.combine((now - PAST).date(), time()), datetime.combine((now + AHEAD).date(), time()),
            tick).check(calendar)
    days: set[date] = set()
    windows: dict[str, None] = {}
    taken = 0
    for event in _expand(calendar, text, now, field):
        tick()
        if str(event.get("STATUS", "")).upper() == "CANCELLED":
            continue
        start, end = _moment(event, "DTSTART", field), _moment(event, "DTEND", field)
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

"""A job's calendars applied to its occurrences: which are skipped and why, the year check at submit, and the
fire-time previews that show what a calendar skips. Pure: the calendars come in as values.

An occurrence that falls on one of the job's `exclude_calendars`, or outside one of its `only_calendars`, is
recorded `skipped` with the calendar's name as its reason (never left out of the ledger); one whose calendar is
gone (deleted after the job was stored) is skipped too, saying so: a job never runs on a day it cannot check.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from jetcron.core.errors import InvalidSpec
from jetcron.core.models import JobSpec, Schedule
from jetcron.core.timing.calendar_time import Compiled
from jetcron.core.timing.cron import Occurrence, occurrences, zone
from jetcron.core.timing.schedule_text import CALENDAR

__all__ = ["CALENDAR", "JobCalendars", "apply", "check_year", "preview", "skip_kind"]

"""Every skip reason a calendar gives starts with this, then the calendar's name."""
_ONLY = ": outside it (only)"
_UNKNOWN = ": unknown (deleted after the job was stored)"
_US = timedelta(microseconds=1)
YEAR = timedelta(days=366)
_STEPS = 5000
"""Jumps the year check makes at most (one per change of a calendar: a day, a window's edge); past it, it
says nothing rather than refuse a job it could not judge."""


@dataclass(frozen=True)
class JobCalendars:
    """The calendars one job names, resolved: None for a name no calendar has (any more)."""

    exclude: tuple[tuple[str, Compiled | None], ...] = ()
    only: tuple[tuple[str, Compiled | None], ...] = ()

    def reason(self, at: datetime) -> str | None:
        """Why the occurrence at `at` is skipped, or None when it runs."""
        for name, cal in self.exclude:
            if cal is None:
                return f"{CALENDAR}{name}{_UNKNOWN}"
            if cal.contains(at):
                return f"{CALENDAR}{name}"
        for name, cal in self.only:
            if cal is None:
                return f"{CALENDAR}{name}{_UNKNOWN}"
            if not cal.contains(at):
                return f"{CALENDAR}{name}{_ONLY}"
        return None

    def next_change(self, at: datetime) -> datetime | None:
        """No later than the first instant after `at` at which `reason` may answer otherwise (None: never)."""
        found = [c for _, cal in (*self.exclude, *self.only) if cal is not None
                 and (c := cal.next_change(at)) is not None]
        return min(found, default=None)

    def field_of(self, reason: str) -> str:
        return "only_calendars" if reason.endswith(_ONLY) else "exclude_calendars"


def skip_kind(reason: str | None) -> str | None:
    """`exclude`, `only` or `unknown` for a reason a calendar gave (the metric's label), else None."""
    if reason is None or not reason.startswith(CALENDAR):
        return None
    return "unknown" if reason.endswith(_UNKNOWN) else "only" if reason.endswith(_ONLY) else "exclude"


def apply(stream: Iterator[Occurrence], calendars: JobCalendars | None) -> Iterator[Occurrence]:
    """The occurrences, each one a calendar skips marked with its reason (a DST gap's own reason stays)."""
    if calendars is None or not (calendars.exclude or calendars.only):
        yield from stream
        return
    for occ in stream:
        why = occ.skipped if occ.skipped is not None else calendars.reason(occ.at)
        yield occ if why is occ.skipped else Occurrence(at=occ.at, skipped=why)


def _next(schedule: Schedule, after: datetime, created_at: datetime) -> Occurrence | None:
    return next(occurrences(schedule, after, created_at=created_at), None)


def check_year(spec: JobSpec, calendars: JobCalendars | None, *, now: datetime, created_at: datetime) -> None:
    """InvalidSpec when the job's calendars skip every occurrence it has in the year from `now` (at least its
    next one): such a job would never run. A schedule with no occurrence in that year is not judged here."""
    if calendars is None or not (calendars.exclude or calendars.only):
        return
    schedule, end, first = spec.schedule, now + YEAR, None
    after = now - _US
    for _ in range(_STEPS):
        occ = _next(schedule, after, created_at)
        if occ is None or (occ.at >= end and first is not None):
            break
        if occ.skipped is not None:  # a DST gap's: not a calendar's doing
            after = occ.at
            continue
        why = calendars.reason(occ.at)
        if why is None:
            return
        first = first or (occ.at, why)
        change = calendars.next_change(occ.at)
        if change is None or occ.at >= end:
            break
        after = max(occ.at, change - _US)
    else:
        return
    if first is not None:
        at, why = first
        names = [n for n, _ in (calendars.only if why.endswith(_ONLY) else calendars.exclude)]
        raise InvalidSpec(calendars.field_of(why), names, f"every occurrence of the job in the year from "
                          f"{now.astimezone(UTC):%Y-%m-%d} is skipped (the first, {at.isoformat()}: {why}); it would "
                          "never run")


def preview(schedule: Schedule, start: datetime, count: int, *, created_at: datetime | None = None,
            calendars: JobCalendars | None = None) -> list[dict[str, str | None]]:
    """The next `count` fire times at or after `start`, with the occurrences skipped between them (a DST gap's,
    a calendar's). A run of occurrences one calendar skips is one row, `until` the instant the calendar next
    changes, so an every-second job skipped for a weekend is a row, not 172,800. Bounded like cron.preview."""
    tz = zone(schedule.tz)
    made = created_at or start
    rows: list[dict[str, str | None]] = []
    fired, after = 0, start - _US
    for _ in range(2 * count + 10_000):
        occ = _next(schedule, after, made)
        if occ is None:
            break
        why = occ.skipped if occ.skipped is not None else (calendars.reason(occ.at) if calendars else None)
        row: dict[str, str | None] = {"local": occ.at.astimezone(tz).isoformat(), "utc": occ.at.isoformat(),
                                      "skipped": why, "until": None}
        rows.append(row)
        after = occ.at
        if why is None:
            fired += 1
            if fired == count:
                break
        elif occ.skipped is None and calendars is not None:
            change = calendars.next_change(occ.at)
            if change is None:
                row["until"] = "never"  # nothing later runs either
                break
            following = _next(schedule, occ.at, made)
            if following is not None and following.at < change:
                row["until"] = change.isoformat()
                after = change - _US
    return rows


"""Whether an instant lies in a calendar, and the next instant at which that can change. Pure.

Dates, rules, weekly and daily windows and wall-time spans are read on the calendar zone's wall clock (a DST
gap's wall times never occur, a fold's occur twice, both in or both out); spans with an offset are absolute.
`next_change` is never later than the true change (it may be earlier: asking again is then cheap), which is what
lets the year check and the previews jump over a run of skipped occurrences instead of walking it.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from jetcron.core.timing.calendars import CalendarRule, CalendarSpec, parse_window
from jetcron.core.timing.cron import zone

__all__ = ["Compiled", "compile_calendar"]

_WEEK, _DAY = 7 * 86400, 86400
_SECOND = timedelta(seconds=1)
_STEP = timedelta(days=7)
_RULE_DAYS = {CalendarRule.WEEKDAYS: frozenset(range(5)), CalendarRule.WEEKENDS: frozenset({5, 6})}


def _wall_seconds(local: datetime, period: int) -> float:
    """Seconds since the start of the local week (Monday 00:00) or day."""
    of_day = local.hour * 3600 + local.minute * 60 + local.second + local.microsecond / 1e6
    return of_day + (local.weekday() * _DAY if period == _WEEK else 0)


def _inside(position: float, start: int, end: int) -> bool:
    return start <= position < end if start < end else position >= start or position < end


def _to_utc(wall: datetime, tz: ZoneInfo, after: datetime) -> datetime | None:
    """The earliest of a wall time's instants (both folds) after `after`: a gap's wall time maps to its side
    before the transition, which is never later than when the wall clock passes it."""
    found = [c for c in (wall.replace(tzinfo=tz, fold=f).astimezone(UTC) for f in (0, 1)) if c > after]
    return min(found) if found else None


@dataclass(frozen=True)
class Compiled:
    """A calendar ready to be asked about instants: built once per revision (compile_calendar)."""

    name: str
    tz: ZoneInfo
    dates: frozenset[date]
    ordered: tuple[date, ...]
    """The dates, sorted."""
    days: frozenset[int]
    """Weekdays (Monday 0) its rules cover."""
    weekly: tuple[tuple[int, int], ...]
    daily: tuple[tuple[int, int], ...]
    starts: tuple[datetime, ...]
    """Absolute spans (UTC), sorted by start; `reach[i]` is the latest end among the first i + 1."""
    reach: tuple[datetime, ...]
    edges: tuple[datetime, ...]
    """Every start and end of the absolute spans, sorted."""
    wall_starts: tuple[datetime, ...]
    wall_reach: tuple[datetime, ...]
    wall_edges: tuple[datetime, ...]

    def _on(self, day: date) -> bool:
        return day in self.dates or day.weekday() in self.days

    def _day_change(self, today: date) -> date | None:
        """The first day after `today` whose dates-and-rules membership differs from today's (None: none will)."""
        now_in = self._on(today)
        for k in range(1, 9):
            if self._on(today + timedelta(days=k)) != now_in:
                return today + timedelta(days=k)
        if self.days or now_in:
            return today + timedelta(days=8)  # constant for a week: look again from there
        i = bisect.bisect_right(self.ordered, today)
        return self.ordered[i] if i < len(self.ordered) else None

    def contains(self, at: datetime) -> bool:
        local = at.astimezone(self.tz)
        if local.date() in self.dates or local.weekday() in self.days:
            return True
        if any(_inside(_wall_seconds(local, _WEEK), s, e) for s, e in self.weekly):
            return True
        if any(_inside(_wall_seconds(local, _DAY), s, e) for s, e in self.daily):
            return True
        i = bisect.bisect_right(self.starts, at)
        if i and self.reach[i - 1] > at:
            return True
        wall = local.replace(tzinfo=None)
        j = bisect.bisect_right(self.wall_starts, wall)
        return bool(j) and self.wall_reach[j - 1] > wall

    def next_change(self, at: datetime) -> datetime | None:
        """An instant after `at`, no later than the first one at which `contains` may answer otherwise; None when
        it never will."""
        local = at.astimezone(self.tz)
        wall = local.replace(tzinfo=None)
        candidates: list[datetime] = []
        if self.dates or self.days:
            day = self._day_change(local.date())
            if day is not None:
                candidates.append(datetime.combine(day, time()))
        for period, windows in ((_WEEK, self.weekly), (_DAY, self.daily)):
            now_s = _wall_seconds(local, period)
            for edge in (s for pair in windows for s in pair):
                ahead = (edge - now_s) % period or period
                candidates.append(wall + timedelta(seconds=ahead))
        k = bisect.bisect_right(self.wall_edges, wall)
        candidates += self.wall_edges[k:k + 1]
        walls = [c for c in (_to_utc(c, self.tz, at) for c in candidates) if c is not None]
        i = bisect.bisect_right(self.edges, at)
        found = min([*walls, *self.edges[i:i + 1]], default=None)
        if candidates:  # wall-clock entries: a DST transition before `found` moves the wall clock itself
            shift = _offset_change(self.tz, at, found or at + timedelta(days=400))
            if shift is not None and (found is None or shift < found):
                found = shift
        return found


def _offset_change(tz: ZoneInfo, start: datetime, limit: datetime) -> datetime | None:
    """The first instant in (start, limit] at which the zone's UTC offset differs from its offset at `start`, to
    the second; sampled a week at a time (no zone changes its offset twice within a week)."""
    offset = start.astimezone(tz).utcoffset()
    lo = start.replace(microsecond=0)  # transitions fall on whole seconds: bisect over them, exactly
    while lo < limit:
        hi = min(lo + _STEP, limit.replace(microsecond=0) + _SECOND)
        if hi.astimezone(tz).utcoffset() != offset:
            while hi - lo > _SECOND:
                mid = lo + ((hi - lo) // _SECOND // 2) * _SECOND
                lo, hi = (mid, hi) if mid.astimezone(tz).utcoffset() == offset else (lo, mid)
            return hi
        lo = hi
    return None


def _spans(pairs: list[tuple[datetime, datetime]]) -> tuple[tuple[datetime, ...], tuple[datetime, ...],
                                                             tuple[datetime, ...]]:
    pairs = sorted(pairs)
    reach: list[datetime] = []
    for _, end in pairs:
        reach.append(max(end, reach[-1]) if reach else end)
    return (tuple(s for s, _ in pairs), tuple(reach), tuple(sorted({t for pair in pairs for t in pair})))


def compile_calendar(spec: CalendarSpec) -> Compiled:
    """A validated calendar (calendars.validate_calendar) as lookups."""
    weekly: list[tuple[int, int]] = []
    daily: list[tuple[int, int]] = []
    absolute: list[tuple[datetime, datetime]] = []
    wall: list[tuple[datetime, datetime]] = []
    for text in spec.windows:
        window = parse_window(text)
        if window.kind == "weekly":
            weekly.append((window.start_s, window.end_s))
        elif window.kind == "daily":
            daily.append((window.start_s, window.end_s))
        else:
            assert window.start is not None and window.end is not None
            (absolute if window.start.tzinfo is not None else wall).append((window.start, window.end))
    days = frozenset().union(*(_RULE_DAYS[rule] for rule in spec.rules))
    starts, reach, edges = _spans(absolute)
    wall_starts, wall_reach, wall_edges = _spans(wall)
    return Compiled(name=spec.name, tz=zone(spec.tz, "tz"), dates=frozenset(spec.dates),
                    ordered=tuple(sorted(set(spec.dates))), days=days,
                    weekly=tuple(weekly), daily=tuple(daily), starts=starts, reach=reach, edges=edges,
                    wall_starts=wall_starts, wall_reach=wall_reach, wall_edges=wall_edges)

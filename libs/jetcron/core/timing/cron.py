"""Schedules as pure functions: validation and the nominal fire times, DST rules included."""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from itertools import islice, pairwise
from zoneinfo import ZoneInfo

import msgspec
from croniter import CroniterBadDateError, CroniterError, croniter

from jetcron.core.errors import InvalidSpec
from jetcron.core.models import FoldPolicy, GapPolicy, Schedule, ScheduleKind
from jetcron.core.timing.schedule_text import ALIASES as _ALIASES
from jetcron.core.timing.schedule_text import check_instant, expand_alias, zone

__all__ = ["CronExpr", "Occurrence", "dst_note", "every_index", "expand_alias", "next_fires", "occurrences",
           "parse_cron", "validate_schedule", "zone"]

_MAX_CRON_CHARS = 200
# Enough to reach Feb 29 across a skipped century leap year (2096 -> 2104) and any nth weekday.
_MAX_YEARS_BETWEEN_MATCHES = 30
_SECOND, _US = timedelta(seconds=1), timedelta(microseconds=1)
_BAD_CRON = (CroniterError, ValueError, KeyError, IndexError, TypeError, OverflowError)


class Occurrence(msgspec.Struct, frozen=True, kw_only=True):
    """One nominal fire time of a schedule."""

    at: datetime
    """The nominal instant, UTC: unique per schedule, so it can name the run."""
    skipped: str | None = None
    """Why this occurrence does not run (a DST gap under on_gap=skip), or None."""


class CronExpr(msgspec.Struct, frozen=True, kw_only=True):
    """A parsed cron expression, in croniter's field order (seconds last)."""

    text: str
    croniter_form: str
    seconds: tuple[int, ...]
    minutes: tuple[int, ...]
    hours: tuple[int, ...]

    @property
    def wildcard_hour(self) -> bool:
        """The hour field is a wildcard as Vixie cron reads it (it starts with `*`: `*`, `*/2`), or every hour
        matches: such a job runs in both passes of a fall-back fold, as in Vixie cron."""
        return len(self.hours) == 24 or self.croniter_form.split()[1].startswith("*")

    @property
    def shortest_gap_seconds(self) -> int:
        """The shortest wall-clock gap between two fires; assumes consecutive days can both fire."""
        s, m, h = self.seconds, self.minutes, self.hours
        span_s = s[-1] - s[0]
        span_ms = (m[-1] - m[0]) * 60 + span_s
        gaps = [86400 - (h[-1] - h[0]) * 3600 - span_ms]
        gaps += [b - a for a, b in pairwise(s)]
        gaps += [(b - a) * 60 - span_s for a, b in pairwise(m)]
        gaps += [(b - a) * 3600 - span_ms for a, b in pairwise(h)]
        return min(gaps)


def _values(field: Sequence[object], full: range) -> tuple[int, ...]:
    return tuple(full) if field == ["*"] else tuple(sorted(v for v in field if isinstance(v, int)))


def parse_cron(expr: str, field: str = "schedule.cron") -> CronExpr:
    """5 fields, 6 with seconds FIRST (as NATS and Dkron write it), or an @alias."""
    if not isinstance(expr, str) or len(expr) > _MAX_CRON_CHARS:
        raise InvalidSpec(field, expr, f"must be a string of at most {_MAX_CRON_CHARS} characters")
    text = expr.strip()
    parts = expand_alias(text).split()
    if text.startswith("@") and text.lower() not in _ALIASES:
        raise InvalidSpec(field, expr, f"unknown alias (known: {', '.join(_ALIASES)})")
    if len(parts) not in (5, 6):
        raise InvalidSpec(field, expr, "expected 5 fields, or 6 with seconds first")
    form = " ".join(parts[1:] + parts[:1]) if len(parts) == 6 else " ".join(parts)
    try:
        expanded = croniter(form, datetime(2000, 1, 1)).expanded
    except _BAD_CRON as exc:
        raise InvalidSpec(field, expr, f"not a valid cron expression: {exc}") from exc
    seconds = _values(expanded[5], range(60)) if len(parts) == 6 else (0,)
    minutes, hours = _values(expanded[0], range(60)), _values(expanded[1], range(24))
    return CronExpr(text=expr, croniter_form=form, seconds=seconds, minutes=minutes, hours=hours)


# (required, optional) fields per kind; any other kind's field set is a mistake worth reporting.
_KIND_FIELDS: dict[ScheduleKind, tuple[tuple[str, ...], tuple[str, ...]]] = {
    ScheduleKind.NOW: ((), ()), ScheduleKind.AT: (("at",), ()),
    ScheduleKind.EVERY: (("every_seconds",), ("anchor",)), ScheduleKind.CRON: (("cron",), ()),
}


def validate_schedule(schedule: Schedule, *, created_at: datetime, min_interval_seconds: float = 1.0) -> None:
    """Raise InvalidSpec unless the schedule is complete, consistent and can fire."""
    check_instant(created_at, "created_at")
    tz = zone(schedule.tz)
    required, optional = _KIND_FIELDS[schedule.kind]
    for name in ("at", "every_seconds", "anchor", "cron"):
        value, kind = getattr(schedule, name), schedule.kind.value
        if value is None and name in required:
            raise InvalidSpec(f"schedule.{name}", value, f"required for kind={kind}")
        if value is not None and name not in required + optional:
            raise InvalidSpec(f"schedule.{name}", value, f"not allowed for kind={kind}")
    for name in ("at", "anchor"):
        if getattr(schedule, name) is not None:
            check_instant(getattr(schedule, name), f"schedule.{name}")
    if schedule.kind is ScheduleKind.EVERY:
        every = schedule.every_seconds
        if isinstance(every, bool) or not isinstance(every, int | float) or not math.isfinite(every):
            raise InvalidSpec("schedule.every_seconds", every, "must be a finite number of seconds")
        if not max(min_interval_seconds, 1e-6) <= every <= 366 * 86400:
            raise InvalidSpec("schedule.every_seconds", every,
                              f"must be between {min_interval_seconds:g} s and 366 days")
    elif schedule.kind is ScheduleKind.CRON:
        expr = parse_cron(schedule.cron or "")
        if expr.shortest_gap_seconds < min_interval_seconds:
            raise InvalidSpec("schedule.cron", schedule.cron,
                              f"fires more often than every {min_interval_seconds:g} s")
        start = created_at.astimezone(tz).replace(tzinfo=None)
        try:  # croniter gives up after a bounded number of years: a search that cannot hang
            croniter(expr.croniter_form, start, max_years_between_matches=_MAX_YEARS_BETWEEN_MATCHES
                     ).get_next(datetime)
        except CroniterBadDateError as exc:
            raise InvalidSpec("schedule.cron", schedule.cron, "can never fire") from exc


def occurrences(schedule: Schedule, after: datetime, *, created_at: datetime) -> Iterator[Occurrence]:
    """Nominal occurrences strictly after `after`, increasing, lazily (endless for every and cron)."""
    if schedule.kind is ScheduleKind.NOW:
        single: datetime | None = created_at
    elif schedule.kind is ScheduleKind.AT:
        single = schedule.at
    elif schedule.kind is ScheduleKind.EVERY:
        return _every(schedule, after, created_at)
    else:
        return _unique(_cron(parse_cron(schedule.cron or ""), schedule, after), after)
    return iter([Occurrence(at=single.astimezone(UTC))] if single is not None and single > after else [])


def next_fires(schedule: Schedule, after: datetime, count: int, *, created_at: datetime) -> list[Occurrence]:
    return list(islice(occurrences(schedule, after, created_at=created_at), count))


def dst_note(schedule: Schedule, at: datetime) -> str | None:
    """What a daylight-saving change does to a cron job's fire time `at` (an instant that fires): its wall time
    happens twice (a fold: which pass this is, and whether the other runs too), or the wall time it was due at does
    not exist (a gap, on_gap=shift: it runs at the first instant after); None when neither. An interval or a
    one-off fires at instants, which no change of offset moves. A gap skipped (on_gap=skip) is the occurrence's own
    `skipped` reason."""
    if schedule.kind is not ScheduleKind.CRON:
        return None
    tz = zone(schedule.tz)
    local = at.astimezone(tz)
    wall = local.replace(tzinfo=None)
    kind, first, _second = _resolve(wall, tz)
    if kind == "fold":
        which = "first" if at == first else "second"
        both = parse_cron(schedule.cron or "").wildcard_hour or schedule.on_fold is FoldPolicy.BOTH
        runs = f"it runs in both passes, this is the {which}" if both else (
            f"it runs once, in the {which} pass (on_fold {schedule.on_fold})")
        return f"dst fold: {_clock(wall)} happens twice in {schedule.tz} on {wall:%Y-%m-%d}; {runs}"
    before, after = (at - _US).astimezone(tz).utcoffset(), local.utcoffset()
    if schedule.on_gap is not GapPolicy.SHIFT or before is None or after is None or after <= before:
        return None
    # `at` is a spring-forward instant: the wall times [wall - jump, wall) do not exist that day.
    form = parse_cron(schedule.cron or "").croniter_form
    try:
        due = croniter(form, wall - (after - before) - _SECOND, max_years_between_matches=1).get_next(datetime)
    except _BAD_CRON:
        return None
    if due >= wall:
        return None  # a fire at the first instant after the gap, due then, not moved there
    shared = f", one run with {_clock(wall)}'s own" if croniter.match(form, wall) else ""
    return (f"dst gap: {_clock(due)} does not exist in {schedule.tz} on {due:%Y-%m-%d}; it runs at "
            f"{_clock(wall)} (on_gap shift){shared}")


def _clock(wall: datetime) -> str:
    return f"{wall:%H:%M:%S}" if wall.second else f"{wall:%H:%M}"


def preview(schedule: Schedule, start: datetime, count: int) -> list[dict[str, str | None]]:
    """The next `count` fire times at or after `start` (counted if it fires), with the occurrences a DST gap skips
    between them: what `jetcron schedule preview` and the REST preview show. Bounded: skipped occurrences come a
    gap's worth at a time, never all of them (validate_schedule)."""
    tz = zone(schedule.tz)
    rows: list[dict[str, str | None]] = []
    fired = 0
    for o in islice(occurrences(schedule, start - datetime.resolution, created_at=start), 2 * count + 10_000):
        rows.append({"local": o.at.astimezone(tz).isoformat(), "utc": o.at.isoformat(), "skipped": o.skipped})
        fired += o.skipped is None
        if fired == count:
            break
    return rows


def every_index(schedule: Schedule, instant: datetime, *, created_at: datetime) -> tuple[datetime, int, int]:
    """(anchor, interval in µs, index of the first occurrence strictly after `instant`): no iteration."""
    anchor = (schedule.anchor or created_at).astimezone(UTC)
    step = max(1, round((schedule.every_seconds or 0.0) * 1_000_000))
    elapsed = (instant - anchor) // _US
    return anchor, step, elapsed // step + 1 if elapsed >= 0 else 0


def _every(schedule: Schedule, after: datetime, created_at: datetime) -> Iterator[Occurrence]:
    anchor, step, k = every_index(schedule, after, created_at=created_at)
    while True:
        try:  # integer microseconds: no float drift however far from the anchor
            at = anchor + timedelta(microseconds=k * step)
        except OverflowError:
            return
        yield Occurrence(at=at)
        k += 1


def _resolve(wall: datetime, tz: ZoneInfo) -> tuple[str, datetime, datetime]:
    """('plain'|'fold'|'gap', first, second) for a naive local wall time."""
    first = wall.replace(tzinfo=tz, fold=0).astimezone(UTC)
    second = wall.replace(tzinfo=tz, fold=1).astimezone(UTC)
    if first <= second:
        return ("plain" if first == second else "fold"), first, second
    # In a gap zoneinfo's fold=1 lands before the transition and fold=0 after: bisect to it.
    # Whole seconds: transitions fall on them, and the result must be an exact instant.
    lo, hi, before = 0, (first - second) // _SECOND, second.astimezone(tz).utcoffset()
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if (second + mid * _SECOND).astimezone(tz).utcoffset() == before else (lo, mid)
    return "gap", second + hi * _SECOND, second + hi * _SECOND


def _start_wall(after: datetime, tz: ZoneInfo) -> datetime:
    # A wall time w fires at u with w = u + offset(u); starting from the smallest offset of the
    # next two days keeps the second pass of a coming fold, which lies behind after's own wall time.
    offsets = [(after + timedelta(hours=h)).astimezone(tz).utcoffset() or timedelta() for h in range(49)]
    start = (after + min(offsets)).replace(tzinfo=None, microsecond=0)
    return start - _SECOND


def _cron(expr: CronExpr, schedule: Schedule, after: datetime) -> Iterator[Occurrence]:
    """croniter's local wall times mapped to UTC under the gap and fold rules, in UTC order."""
    tz = zone(schedule.tz)
    walls = croniter(expr.croniter_form, _start_wall(after, tz),
                     max_years_between_matches=_MAX_YEARS_BETWEEN_MATCHES)
    both = expr.wildcard_hour or schedule.on_fold is FoldPolicy.BOTH
    second_passes: list[datetime] = []  # heap: fold repeats wait until the wall-time stream passes them
    while True:
        try:
            wall = walls.get_next(datetime)
        except _BAD_CRON:  # beyond croniter's search bound or year 9999: the schedule has ended
            break
        kind, first, second = _resolve(wall, tz)
        skipped = None
        if kind == "gap" and schedule.on_gap is GapPolicy.SKIP:
            shown = f"{wall:%H:%M:%S}" if wall.second else f"{wall:%H:%M}"
            skipped = f"dst gap: {shown} does not exist in {schedule.tz} on {wall:%Y-%m-%d}"
        elif kind == "fold" and both:
            heapq.heappush(second_passes, second)
        elif kind == "fold" and schedule.on_fold is FoldPolicy.LAST:
            first = second
        while second_passes and second_passes[0] <= first:
            yield Occurrence(at=heapq.heappop(second_passes))
        yield Occurrence(at=first, skipped=skipped)
    while second_passes:
        yield Occurrence(at=heapq.heappop(second_passes))


def _unique(stream: Iterator[Occurrence], after: datetime) -> Iterator[Occurrence]:
    """Strictly after `after`, strictly increasing: gap times shifted onto one instant become one."""
    pending: Occurrence | None = None
    for occ in stream:
        if occ.at <= after:
            continue
        if pending is None or occ.at > pending.at:
            if pending is not None:
                yield pending
            pending = occ
        elif occ.at == pending.at and pending.skipped is not None and occ.skipped is None:
            pending = occ  # a real fire and a skipped gap time share the instant: the fire wins
    if pending is not None:
        yield pending

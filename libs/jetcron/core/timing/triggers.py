"""Trigger decisions as plans: which occurrences to record, when they start, overlap and backfill."""

from __future__ import annotations

import enum
import random
from collections import deque
from collections.abc import Iterator
from datetime import datetime, timedelta

import msgspec

from jetcron.core.errors import InvalidSpec
from jetcron.core.ids import run_id, stable_fraction
from jetcron.core.models import JitterPolicy, JobSpec, MisfireKind, OverlapPolicy, Schedule, ScheduleKind
from jetcron.core.timing.cron import Occurrence, every_index, occurrences
from jetcron.core.timing.exclusions import JobCalendars, apply
from jetcron.core.timing.schedule_text import check_instant

__all__ = ["BackfillRun", "FirePlan", "OverlapAction", "PlannedFire", "decide_overlap", "jitter_offset",
           "next_wake", "pace_backfill", "plan_backfill", "plan_fires", "staging_horizon"]

_US = timedelta(microseconds=1)
# Counting occurrences older than the catch-up window stops here; past it the last one is bisected for.
_COUNT_CAP = 1000


class PlannedFire(msgspec.Struct, frozen=True, kw_only=True):
    """One occurrence to record: a run to create, or a skipped record."""

    nominal: datetime
    """UTC nominal fire time: the run's identity."""
    due_at: datetime
    """When the run should start: nominal plus jitter, or now when it runs late."""
    skip_reason: str | None = None
    """Why it is recorded as skipped ('misfire: ...', 'dst gap: ...', 'paused'), or None to run."""


class FirePlan(msgspec.Struct, frozen=True, kw_only=True):
    """What plan_fires decided; the trigger service records the fires, then stores the cursor."""

    fires: list[PlannedFire]
    """In nominal order: runs to create and skipped records."""
    cursor: datetime | None
    """The last nominal covered by this plan (the new resume point), or the old cursor."""
    next_wake: datetime | None
    """When to call plan_fires next for this job; None: never again."""
    done: bool
    """The schedule will never fire again."""


class OverlapAction(enum.StrEnum):
    START = "start"
    """Start the new run now."""
    SKIP = "skip"
    """Record the new run as skipped."""
    BUFFER = "buffer"
    """Hold the new run until the active one ends."""
    CANCEL_PREVIOUS = "cancel_previous"
    """Cancel the active run, then start the new one."""


def decide_overlap(policy: OverlapPolicy, active: int, buffered: int) -> OverlapAction:
    """What to do with a due run while `active` runs of the job go on and `buffered` wait."""
    if not active or policy is OverlapPolicy.ALLOW:
        return OverlapAction.START
    if policy is OverlapPolicy.CANCEL_PREVIOUS:
        return OverlapAction.CANCEL_PREVIOUS
    if policy is OverlapPolicy.BUFFER_ONE and buffered == 0:
        return OverlapAction.BUFFER
    return OverlapAction.SKIP


def staging_horizon(spec: JobSpec, horizon_seconds: float) -> float:
    """How far ahead of its due time an occurrence of `spec` may be recorded and handed to placement.

    An overlap policy other than `allow` asks "is the previous run still going?" and the answer is
    only meaningful at the due time: staged two seconds early, a run that will have ended by then
    would count as active (and a quick every-second job would skip every other occurrence).
    """
    return horizon_seconds if spec.overlap is OverlapPolicy.ALLOW else 0.0


def next_wake(spec: JobSpec, *, created_at: datetime, cursor: datetime | None,
              horizon_seconds: float) -> datetime | None:
    """When plan_fires will first have something to record after `cursor` (None: never again).

    What a standby keeps in its index for jobs of shards it does not hold, from the cursors it watches:
    after a takeover only the jobs that are due wake, not every job of the shard. Never later than the
    plan's own next_wake: it is the first unrecorded occurrence, at its fixed-jitter staging time.
    """
    schedule = spec.schedule
    first = schedule.at if schedule.kind is ScheduleKind.AT and schedule.at is not None else created_at
    after = cursor if cursor is not None else min(created_at, first) - _US
    occ = next(occurrences(schedule, after, created_at=created_at), None)
    if occ is None:
        return None
    fixed = 0.0 if schedule.kind is ScheduleKind.NOW else _fixed_offset(spec.name, spec.jitter)
    return occ.at + timedelta(seconds=fixed - staging_horizon(spec, horizon_seconds))


def _fixed_offset(job_name: str, jitter: JitterPolicy) -> float:
    return stable_fraction(job_name) * jitter.window_seconds if jitter.window_seconds else 0.0


def jitter_offset(job_name: str, jitter: JitterPolicy, rng: random.Random) -> float:
    """Seconds after the nominal time: a per-name fixed part that spreads herds, plus a random part."""
    extra = rng.random() * jitter.random_seconds if jitter.random_seconds > 0 else 0.0
    return _fixed_offset(job_name, jitter) + extra


def _first_after(schedule: Schedule, after: datetime, created_at: datetime) -> datetime | None:
    occ = next(occurrences(schedule, after, created_at=created_at), None)
    return occ.at if occ is not None else None


def _older(schedule: Schedule, after: datetime, before: datetime,
           created_at: datetime) -> tuple[int | None, datetime | None]:
    """(count, last) of the occurrences in (after, before); count None when above _COUNT_CAP."""
    if schedule.kind is ScheduleKind.EVERY:  # pure arithmetic, however long the outage
        anchor, step, first = every_index(schedule, after, created_at=created_at)
        elapsed = (before - anchor) // _US
        last = (elapsed - 1) // step if elapsed > 0 else -1
        return (last - first + 1, anchor + last * step * _US) if last >= first else (0, None)
    count, found = 0, None
    for occ in occurrences(schedule, after, created_at=created_at):
        if occ.at >= before:
            return count, found
        if count == _COUNT_CAP:
            break
        count, found = count + 1, occ.at
    if found is None or count < _COUNT_CAP:
        return count, found
    lo, hi = found, before  # bisect: each probe is one next(), never a walk through the outage
    while True:
        nxt = _first_after(schedule, lo, created_at)
        if nxt is None or nxt >= before:
            return None, lo
        mid = nxt + (hi - nxt) / 2
        probe = _first_after(schedule, mid, created_at)
        lo, hi = (probe, hi) if probe is not None and probe < before else (nxt, mid)


class _Ahead:
    """The occurrence stream with look-ahead: whether a missed one is among the latest needs the next."""

    def __init__(self, source: Iterator[Occurrence], late_line: datetime, pause: tuple[datetime, datetime] | None):
        self._source, self._buf = source, deque[Occurrence]()
        self._late_line, self._pause = late_line, pause

    def peek(self, i: int = 0) -> Occurrence | None:
        while len(self._buf) <= i:
            occ = next(self._source, None)
            if occ is None:
                return None
            self._buf.append(occ)
        return self._buf[i]

    def pop(self) -> None:
        self._buf.popleft()

    def paused(self, occ: Occurrence) -> bool:
        """The occurrence came due while the job was paused."""
        return self._pause is not None and self._pause[0] <= occ.at < self._pause[1]

    def missed_after_head(self, keep: int) -> int:
        """Missed runnable occurrences after the head, counted up to `keep`."""
        count, i = 0, 1
        while count < keep:
            occ = self.peek(i)
            if occ is None or occ.at >= self._late_line:
                break  # occurrences increase: none later is missed either
            if occ.skipped is None:
                count += 1
            i += 1
        return count


def plan_fires(spec: JobSpec, *, created_at: datetime, cursor: datetime | None, now: datetime,
               horizon_seconds: float, rng: random.Random, paused_at: datetime | None = None,
               resumed_at: datetime | None = None, limit: int = 1000,
               calendars: JobCalendars | None = None) -> FirePlan:
    """Decide the occurrences after `cursor` whose fixed-jitter due time is within now + horizon.

    On time (nominal >= now - grace): runs at nominal + jitter. Missed: `skip` records all
    skipped; `latest` runs only the last missed; `all` runs the last `max_catchup` missed; those
    that run are due now. Occurrences older than the catch-up window are never walked one by
    one: they become ONE skipped record per plan, at the nominal of the last of them, with the
    count in its reason ("more than 1000" when counting would mean walking a long outage); the
    ledger has a record for every nominal inside the window only. A job resumed at `resumed_at`
    missed every unrecorded occurrence before it, however short the pause (grace does not
    apply): those follow the misfire policy, and those inside [`paused_at`, `resumed_at`) say
    "paused" in their reason; a kind=now job paused before it fired runs on resume. Missed-ness
    depends on each occurrence and its successors only, so a plan cut short by `limit` continues
    the same way in the next call. An occurrence the job's `calendars` skip is recorded skipped, naming the
    calendar (jetcron.core.timing.exclusions), as a DST gap's is: it is never run, late or not.
    """
    if limit < 1:
        raise ValueError(f"limit must be at least 1 (got {limit})")
    schedule, misfire = spec.schedule, spec.misfire
    is_now = schedule.kind is ScheduleKind.NOW
    fixed = timedelta(seconds=0.0 if is_now else _fixed_offset(spec.name, spec.jitter))
    late_line = now - timedelta(seconds=misfire.grace_seconds)
    pause = None
    if resumed_at is not None and (paused_at is None or paused_at < resumed_at):
        late_line = max(late_line, min(resumed_at, now))
        pause = (paused_at or datetime.min.replace(tzinfo=resumed_at.tzinfo), resumed_at)
    window_start = now - timedelta(seconds=misfire.catchup_window_seconds)
    # A new job resumes just before its creation, or before its one-off instant if that is earlier.
    first = schedule.at if schedule.kind is ScheduleKind.AT and schedule.at is not None else created_at
    after = cursor if cursor is not None else min(created_at, first) - _US
    fires: list[PlannedFire] = []
    if not is_now and after < window_start:
        count, last = _older(schedule, after, window_start, created_at)
        if last is not None:
            late = int((now - last).total_seconds())
            shown = f"more than {_COUNT_CAP}" if count is None else str(count)
            reason = (f"misfire: {shown} occurrences older than the catch-up window skipped" if count != 1
                      else f"misfire: outside catch-up window (missed by {late}s)")
            fires.append(PlannedFire(nominal=last, due_at=last, skip_reason=reason))
            after = last
    ahead = _Ahead(apply(occurrences(schedule, after, created_at=created_at), calendars), late_line, pause)
    next_wake: datetime | None = None
    while (occ := ahead.peek()) is not None:
        if occ.at + fixed > now + timedelta(seconds=horizon_seconds):
            next_wake = occ.at + fixed - timedelta(seconds=horizon_seconds)
            break
        if len(fires) >= limit:
            next_wake = now
            break
        fires.append(_decide(spec, occ, ahead, now=now, late_line=late_line, rng=rng))
        ahead.pop()
    return FirePlan(fires=fires, cursor=fires[-1].nominal if fires else cursor, next_wake=next_wake,
                    done=ahead.peek() is None)


def _decide(spec: JobSpec, occ: Occurrence, ahead: _Ahead, *, now: datetime, late_line: datetime,
            rng: random.Random) -> PlannedFire:
    def skip(reason: str) -> PlannedFire:
        return PlannedFire(nominal=occ.at, due_at=occ.at, skip_reason=reason)

    if occ.skipped is not None:
        return skip(occ.skipped)
    is_now = spec.schedule.kind is ScheduleKind.NOW
    if occ.at >= late_line:
        offset = 0.0 if is_now else jitter_offset(spec.name, spec.jitter, rng)
        return PlannedFire(nominal=occ.at, due_at=occ.at + timedelta(seconds=offset))
    policy, late = spec.misfire, int((now - occ.at).total_seconds())
    if is_now:
        return PlannedFire(nominal=occ.at, due_at=now)
    why = "paused: came due while the job was paused" if ahead.paused(occ) else f"misfire: missed by {late}s"
    if policy.kind is MisfireKind.SKIP:
        return skip(f"{why} (policy skip)")
    keep = 1 if policy.kind is MisfireKind.LATEST else policy.max_catchup
    if ahead.missed_after_head(keep) < keep:
        return PlannedFire(nominal=occ.at, due_at=now)
    if policy.kind is MisfireKind.LATEST:
        return skip(f"{why} (policy latest: a later missed occurrence runs)")
    return skip(f"{why} (policy all: beyond max_catchup={keep})")


def plan_backfill(spec: JobSpec, *, created_at: datetime, start: datetime, end: datetime, now: datetime,
                  limit: int, calendars: JobCalendars | None = None) -> list[PlannedFire]:
    """Every occurrence with start <= nominal < end, due at its nominal (the caller may move it); those a DST gap
    or the job's calendars skip are skipped ones."""
    check_instant(start, "backfill.start")
    check_instant(end, "backfill.end")
    if start >= end:
        raise InvalidSpec("backfill", f"{start.isoformat()}..{end.isoformat()}", "start must be before end")
    if end > now:
        raise InvalidSpec("backfill.end", end.isoformat(), f"must not be after now ({now.isoformat()})")
    fires: list[PlannedFire] = []
    for occ in apply(occurrences(spec.schedule, start - _US, created_at=created_at), calendars):
        if occ.at >= end:
            break
        if len(fires) >= limit:
            raise InvalidSpec("backfill", f"{start.isoformat()}..{end.isoformat()}",
                              f"the range holds more than {limit} occurrences")
        fires.append(PlannedFire(nominal=occ.at, due_at=occ.at, skip_reason=occ.skipped))
    return fires



class BackfillRun(msgspec.Struct, frozen=True, kw_only=True):
    """One backfilled occurrence as the API records it."""

    fire: PlannedFire
    """The occurrence; `due_at` is paced, `skip_reason` set for a DST-skipped one."""
    after: str = ""
    """The run it waits for (a `waiting` record, released when that run ends), or '' to be dispatched."""


def pace_backfill(spec: JobSpec, fires: list[PlannedFire], *, now: datetime, rate_per_second: float,
                  active_run: str = "") -> list[BackfillRun]:
    """Due times and order for a backfill: paced at `rate_per_second`, serialised unless overlap is `allow`.

    The user asked for each of these occurrences, so an overlap policy never skips or cancels one;
    what `skip`, `buffer_one` and `cancel_previous` share is "never two at once", so a backfill under
    them is a chain: each run waits for the one before it, the first for `active_run` (the job's run
    going on now, if any). Under `allow` they start `1 / rate_per_second` apart.
    """
    if not rate_per_second > 0:
        raise InvalidSpec("backfill.rate", rate_per_second, "must be a positive number of runs per second")
    chained = spec.overlap is not OverlapPolicy.ALLOW
    step, previous, out, started = timedelta(seconds=1 / rate_per_second), active_run, [], 0
    for fire in fires:
        if fire.skip_reason is not None:
            out.append(BackfillRun(fire=fire))
            continue
        out.append(BackfillRun(fire=msgspec.structs.replace(fire, due_at=now + started * step),
                               after=previous if chained else ""))
        previous = run_id(spec.key, fire.nominal)
        started += 1
    return out

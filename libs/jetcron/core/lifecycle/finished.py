"""Finished runs per minute, by outcome: what the dashboard's overview charts (docs/dashboard.md, "Finished runs
per minute").

Every run tracker replica already watches every run record (the reconciler's index). Each notes, from that
watch, the runs that end (`Tally`): a record seen live before that is now terminal, or a record made terminal
at birth (a skipped or blocked occurrence). The tracker leader writes what changed once a second: one record per
minute for the whole cluster and one per tenant and minute, each holding absolute counts by outcome. A record
is only ever raised (`merged`: the larger of each count), so a replica that saw less (one started after some
records were let go) never lowers what a replica that saw everything wrote, and two leaders overlapping for a
moment write the same figures. Nothing is written on a run's own path.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta

import msgspec

from jetcron.core.models import Run

MINUTE = timedelta(minutes=1)
WINDOW = timedelta(hours=2)
"""How far back a tracker keeps counting in memory: a run whose end reaches the runs watch more than this after
it finished (every tracker down for that long) is not counted."""
GUARD = timedelta(minutes=2)
"""A terminal record this replica never saw live (made terminal at birth, or whose live revisions the runs watch
skipped: a bucket keeps one revision per run, so a watch that lags behind a run that ends within milliseconds gets
only its end) is counted when it is seen within this of its end. A later write to a record that had already ended
(a missed deadline recorded on a skipped occurrence) is older than this, or was counted within it and is
remembered: it is never counted twice."""
STAMP = "%Y%m%d%H%M"

Scope = str | None
"""A tenant, or None for the whole cluster."""


class FinishedMinute(msgspec.Struct, frozen=True, kw_only=True):
    """The runs that finished in one minute (UTC), by outcome (the run's terminal state): one record of
    jc_finished, for the cluster or for one tenant."""

    minute: datetime
    counts: dict[str, int] = msgspec.field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(self.counts.values())


def minute_of(at: datetime) -> datetime:
    """The UTC minute `at` falls in."""
    return at.astimezone(UTC).replace(second=0, microsecond=0)


def stamp(minute: datetime) -> str:
    """A minute as a key token: YYYYMMDDHHMM (UTC), which sorts as time does."""
    return minute_of(minute).strftime(STAMP)


def parse_stamp(text: str) -> datetime | None:
    try:
        return datetime.strptime(text, STAMP).replace(tzinfo=UTC)
    except ValueError:
        return None


def merged(stored: Mapping[str, int], mine: Mapping[str, int]) -> dict[str, int]:
    """The larger of each count: what a minute's record becomes when a tracker writes what it counted."""
    return {k: max(stored.get(k, 0), mine.get(k, 0)) for k in sorted({*stored, *mine})}


def first_minute(now: datetime, minutes: int) -> datetime:
    """The oldest of the last `minutes` minutes, the current one included."""
    return minute_of(now) - (minutes - 1) * MINUTE


def dense(items: Iterable[FinishedMinute], now: datetime, minutes: int = 60) -> list[FinishedMinute]:
    """The last `minutes` minutes oldest first, the current (partial) one last, each present (an empty one for a
    minute nothing finished in); items outside the span are left out, two for one minute added together."""
    start = first_minute(now, minutes)
    counts: list[Counter[str]] = [Counter() for _ in range(minutes)]
    for item in items:
        i = int((minute_of(item.minute) - start) / MINUTE)
        if 0 <= i < minutes:
            counts[i].update(item.counts)
    return [FinishedMinute(minute=start + i * MINUTE, counts=dict(sorted(c.items()))) for i, c in enumerate(counts)]


class Tally:
    """The finished runs of the last WINDOW, by scope (the cluster, each tenant), minute and outcome, as one
    replica saw them end; and which minutes changed since they were last taken for writing."""

    def __init__(self, window: timedelta = WINDOW, guard: timedelta = GUARD) -> None:
        self.window = window
        self.guard = guard
        self.counts: dict[tuple[Scope, datetime], Counter[str]] = {}
        self.dirty: set[tuple[Scope, datetime]] = set()
        self.recent: dict[str, datetime] = {}
        """Runs counted within GUARD of their end, by id, with their end: a later write to one of them is not a second
        end. (As many as end in GUARD: bounded by what the runs watch already holds during a herd.)"""

    def loaded(self, run: Run, now: datetime) -> bool:
        """A record of the watch's initial values (each run once): counted if it ended within the window."""
        if not run.state.terminal:
            return False
        return self._count(run, run.finished_at or now, now)

    def seen(self, run: Run, *, was_live: bool, now: datetime) -> bool:
        """A live change of a record: counted if it ends the run now. `was_live`: this replica's index held the
        run as not yet ended (its previous record). Otherwise a terminal record is an end only when seen within
        GUARD of it and not counted already (made terminal at birth, or its live revisions skipped by the watch);
        any other is a later write to one that had ended."""
        if not run.state.terminal:
            return False
        ended = run.finished_at or now
        if was_live:
            return self._count(run, ended, now)
        if ended < now - self.guard or run.run_id in self.recent:
            return False
        return self._count(run, ended, now)

    def _count(self, run: Run, ended: datetime, now: datetime) -> bool:
        if ended < now - self.window:
            return False
        minute, outcome = minute_of(ended), run.state.value
        for key in ((None, minute), (run.tenant, minute)):
            counts = self.counts.get(key)
            if counts is None:
                counts = self.counts[key] = Counter()
            counts[outcome] += 1
            self.dirty.add(key)
        if ended >= now - self.guard:
            self.recent[run.run_id] = ended
        return True

    def take(self) -> list[tuple[Scope, FinishedMinute]]:
        """The minutes that changed since the last take, oldest first, with their counts so far."""
        taken = sorted(self.dirty, key=lambda k: (k[1], k[0] or ""))
        self.dirty.clear()
        return [(scope, FinishedMinute(minute=minute, counts=dict(sorted(self.counts[(scope, minute)].items()))))
                for scope, minute in taken if (scope, minute) in self.counts]

    def again(self, scope: Scope, minute: datetime) -> None:
        """A minute whose write failed: taken again next time."""
        if (scope, minute) in self.counts:
            self.dirty.add((scope, minute))

    def trim(self, now: datetime) -> None:
        """Forget the minutes older than the window and the ends older than GUARD."""
        oldest = minute_of(now - self.window)
        for key in [k for k in self.counts if k[1] < oldest]:
            del self.counts[key]
            self.dirty.discard(key)
        for run_id in [r for r, at in self.recent.items() if at < now - self.guard]:
            del self.recent[run_id]

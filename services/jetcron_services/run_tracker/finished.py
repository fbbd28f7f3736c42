"""Finished runs per minute (jetcron.core.lifecycle.finished): every replica counts the ends its runs watch shows, the
leader writes the minutes that changed once a second. Nothing is written on a run's own path."""

from __future__ import annotations

import asyncio
from datetime import datetime

from jetcron.bus.ports import Records
from jetcron.core.errors import JetcronError, WriteConflict
from jetcron.core.lifecycle.finished import FinishedMinute, Scope, Tally, merged, minute_of, stamp
from jetcron.core.models import Run
from jetcron.wire import subjects as s
from jetcron_services.run_tracker.ports import FinishedCountsPorts

FLUSH_SECONDS = 1.0
FLUSH_MAX = 500
"""Records written per flush at most: a new leader's first flushes are every minute of the window it counted (each
read once), spread over seconds so that its lease renewals, in the same loop, are not held up."""
CONCURRENCY = 32


class FinishedCounts:
    """The tally of one replica (fed by the reconciler's runs watch) and, on the leader, its writes to
    jc_finished: each minute's record raised to what this replica counted (jetcron.core.lifecycle.finished.merged)."""

    def __init__(self, ctx: FinishedCountsPorts, store: Records[FinishedMinute], tally: Tally | None = None) -> None:
        self.ctx = ctx
        self.store = store
        self.tally = tally or Tally()
        self.stored: dict[tuple[Scope, datetime], tuple[FinishedMinute, int]] = {}
        """What this replica last wrote or read of each minute, with its revision: its next write of that minute
        is checked against it, without a read (a stale copy costs one refused write and a read)."""
        self.last: datetime | None = None

    def noted(self, run: Run, was_live: bool, synced: bool) -> None:
        """A terminal record from the runs watch: one of its initial values (`synced` False), or a live change of
        a run this replica's index held as not ended (`was_live`) or did not hold."""
        now = self.ctx.clock.now()
        if synced:
            self.tally.seen(run, was_live=was_live, now=now)
        else:
            self.tally.loaded(run, now)

    async def maybe_flush(self, now: datetime, *, write: bool) -> int:
        """Once a second: forget what left the window; write what changed if this replica leads (`write`)."""
        if self.last is not None and (now - self.last).total_seconds() < FLUSH_SECONDS:
            return 0
        self.last = now
        self.tally.trim(now)
        oldest = minute_of(now - self.tally.window)
        for key in [k for k in self.stored if k[1] < oldest]:
            del self.stored[key]
        return await self.flush() if write else 0

    async def flush(self) -> int:
        """Write every minute that changed since the last flush; the records written. A minute whose write fails
        is taken again at the next flush."""
        taken = self.tally.take()
        for scope, value in taken[FLUSH_MAX:]:
            self.tally.again(scope, value.minute)
        gate = asyncio.Semaphore(CONCURRENCY)

        async def one(scope: Scope, value: FinishedMinute) -> bool:
            async with gate:
                try:
                    return await self._raise(scope, value)
                except JetcronError as exc:
                    self.tally.again(scope, value.minute)
                    self.ctx.log.warning("finished runs per minute not written; next second", minute=stamp(
                        value.minute), tenant=scope, error=str(exc))
                    return False

        done = await asyncio.gather(*(one(scope, value) for scope, value in taken[:FLUSH_MAX]))
        return sum(done)

    async def _raise(self, scope: Scope, value: FinishedMinute) -> bool:
        """Raise the minute's record to `value`'s counts; False when it held as much already."""
        key = s.finished_key(scope, stamp(value.minute))
        copy = self.stored.get((scope, value.minute))
        if copy is None:
            copy = await self.store.maybe(key)
            if copy is None:
                try:
                    self.stored[(scope, value.minute)] = (value, await self.store.create(key, value))
                    return True
                except WriteConflict:
                    copy = None  # another leader made it a moment ago: change() reads it

        def decide(stored: FinishedMinute) -> FinishedMinute | None:
            counts = merged(stored.counts, value.counts)
            return None if counts == stored.counts else FinishedMinute(minute=value.minute, counts=counts)

        changed = await self.store.change(key, decide, copy=copy)
        if changed is None:
            return False
        _, new, revision = changed
        self.stored[(scope, value.minute)] = (new, revision)
        return True

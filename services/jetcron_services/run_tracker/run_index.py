"""The reconciler's index of the non-terminal runs, kept from the runs watch (no scans), and when a sweep looks at
each: every sweep, from a time on, or once its agent has no reports left to send."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from datetime import datetime

from jetcron.core.lifecycle.reconcile import Timing, Tracked, quiet_until, release, track, whole, with_horizon
from jetcron.core.models import Run
from jetcron.core.timing.due_index import DueIndex


class ActiveRuns(Mapping[str, Run]):
    """The watched records of the non-terminal runs by id (what the deadlines and the listing read), each in the
    index's form (`jetcron.core.lifecycle.reconcile.index_form`: a waiting run's without its spec and history)."""

    def __init__(self, tracked: dict[str, Tracked]) -> None:
        self._tracked = tracked

    def __getitem__(self, run_id: str) -> Run:
        return self._tracked[run_id].run

    def __iter__(self) -> Iterator[str]:
        return iter(self._tracked)

    def __len__(self) -> int:
        return len(self._tracked)

    def __contains__(self, run_id: object) -> bool:
        return run_id in self._tracked

    def with_queues(self) -> Iterator[tuple[Run, str]]:
        """Each record with its job's queue (which a record in the index's form no longer says)."""
        return ((tracked.run, tracked.queue) for tracked in self._tracked.values())


class RunIndex:
    def __init__(self, timing: Timing) -> None:
        self.timing = timing
        self.tracked: dict[str, Tracked] = {}
        """Run id -> all the reconciler knows of it. The three indexes below say only when a sweep looks at it."""
        self.active = ActiveRuns(self.tracked)
        self.quiet = DueIndex(1)
        """Runs no sweep could act on before a time (`quiet_until`, or a live lease's `Quiet`), by that time: a
        herd staged minutes ahead is tens of thousands of assigned runs that need no look until their due time,
        and a sweep must not even walk them: a sweep comes every 0.25 s, and a walk of them all is the tracker's
        whole CPU at the design's sizes."""
        self.looked_at: set[str] = set()
        """Runs every sweep looks at (running, gangs, waiting, or past their quiet time) until their record
        changes."""
        self.awaiting: dict[str, dict[str, None]] = {}
        """Agent -> runs parked while it says reports are still to go (their `Tracked.awaiting`), in the order
        they were parked: out of the sweeps, released together once it has none left (or is gone)."""

    def on_record(self, run_id: str, run: Run | None, revision: int) -> None:
        """A run's record changed (or was deleted): index it afresh."""
        new = track(self.tracked.get(run_id), run, revision)
        if new is None:
            self._forget(run_id)
            return
        self.store(run_id, new)
        quiet = quiet_until(new.run, self.timing)
        if quiet is None:
            self.quiet.remove(run_id)
            self.looked_at.add(run_id)
        else:
            self.looked_at.discard(run_id)
            self.quiet.set(run_id, quiet)

    def store(self, run_id: str, new: Tracked) -> None:
        """Keep `new` and the awaiting index with it."""
        old = self.tracked.get(run_id)
        was = old.awaiting.agent if old is not None and old.awaiting is not None else None
        agent = new.awaiting.agent if new.awaiting is not None else None
        if was != agent:
            if was is not None:
                self._unpark(was, run_id)
            if agent is not None:
                self.awaiting.setdefault(agent, {})[run_id] = None
        self.tracked[run_id] = new

    def _forget(self, run_id: str) -> None:
        old = self.tracked.pop(run_id, None)
        if old is not None and old.awaiting is not None:
            self._unpark(old.awaiting.agent, run_id)
        self.quiet.remove(run_id)
        self.looked_at.discard(run_id)

    def _unpark(self, agent: str, run_id: str) -> None:
        runs = self.awaiting.get(agent)
        if runs is not None:
            runs.pop(run_id, None)
            if not runs:
                del self.awaiting[agent]

    async def release_awaiting(self, now: datetime, may_still_report: Callable[[str], Awaitable[bool]]) -> None:
        """Runs waiting on an agent's queued reports go back to the sweep once it has none left or is gone (and
        any of them after REPORT_WAIT_CAP). Read before this sweep's events horizon: a heartbeat that said none
        were left was written after every one of them was acked, so that horizon covers them."""
        for agent in list(self.awaiting):
            done = not await may_still_report(agent)
            for run_id in list(self.awaiting.get(agent, ())):
                released = release(self.tracked[run_id], done, now)
                if released is not None:
                    self.store(run_id, released)
                    self.quiet.remove(run_id)
                    self.looked_at.add(run_id)

    def due(self, now: datetime) -> list[Run]:
        """The runs this sweep looks at: those every sweep looks at, and those whose quiet time has come."""
        self.looked_at.update(self.quiet.pop_due(0, now, limit=len(self.tracked) + 1))
        return [self.tracked[r].run for r in self.looked_at]

    def leave_sweeps_until(self, run_id: str, until: datetime) -> None:
        """Out of the sweeps until `until`, only if no record has re-indexed the run since this sweep began (its
        record would time it then; one that ended is no longer tracked)."""
        if run_id in self.looked_at:
            self.looked_at.discard(run_id)
            self.quiet.set(run_id, until)

    def park(self, run_id: str) -> None:
        """Out of the sweeps until its record changes or its agent's reports release it."""
        self.looked_at.discard(run_id)
        self.quiet.remove(run_id)

    def sequence(self, run_ids: Iterable[str], horizon: int) -> None:
        """The runs that asked for the events horizon get the one this sweep read."""
        for run_id in run_ids:
            if (tracked := self.tracked.get(run_id)) is not None:
                self.store(run_id, with_horizon(tracked, horizon))

    def known(self, run_id: str) -> tuple[Run, int] | None:
        """The last watched record of an active run and its revision (maybe stale: Records.change checks), if the
        index keeps it whole (a write must start from the whole record: one in the index's form is read back)."""
        tracked = self.tracked.get(run_id)
        return None if tracked is None or not whole(tracked.run) else (tracked.run, tracked.revision)

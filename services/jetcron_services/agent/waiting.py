"""Attempts assigned ahead of their due time wait here, in one index with one timer, not as tasks.

A staged herd leaves tens of thousands of attempts waiting on one agent. As tasks, each one held about forty
objects (its task, the lease keeper's task, wait_for's inner task, futures, timer handles, contexts) that
the cycle collector walked on every full collection: pauses of seconds at 30,000 waiting attempts, while
leases, assignments and the starts themselves queued behind them. Here a waiting attempt is an entry in a
due-time index (jetcron.core.timing.due_index, the trigger's); its tasks are created when it is due. Its first lease
already covers the wait and its place in the queue (jetcron.core.lifecycle.leases.first_grant), so nothing renews it
meanwhile.

When thousands come due at the same instant they start as a stream: at most `burst` may be between leaving
the index and having started. Their reports are bounded apart, and wait while due attempts are still being
started (reports.py). (Gating the starts on those reports instead made a herd start only as fast as the
tracker took its reports in.)
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from datetime import datetime
from typing import Generic, TypeVar

from jetcron.core.clock import Clock, next_wait
from jetcron.core.timing.due_index import DueIndex
from jetcron_services.agent.reports import ReportWindow

T = TypeVar("T")


Settled = Callable[[], None]
"""Called (once or more: only the first counts) when a started item no longer takes room in the burst."""


class Waiting(Generic[T]):
    """Items by key, each started by `start(item, settled)` once its due time has come, earliest first."""

    def __init__(self, clock: Clock, start: Callable[[T, Settled], None], burst: int = 256,
                 reports: ReportWindow | None = None) -> None:
        self._clock = clock
        self._start = start
        self._reports = reports
        """Held while due items are being started: the starts of a herd go first (reports.py)."""
        self._index = DueIndex(1)
        self._items: dict[str, T] = {}
        self._changed = asyncio.Event()
        self._room = asyncio.Semaphore(burst)

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: str) -> bool:
        return key in self._items

    def add(self, key: str, due: datetime, item: T) -> None:
        first = self._index.next_wake({0})
        self._items[key] = item
        self._index.set(key, due)
        if first is None or due < first:
            self._changed.set()  # earlier than what the loop sleeps for

    def take_back(self, key: str) -> T | None:
        """Stop waiting for it (cancelled, handed back); None when it was not waiting."""
        self._index.remove(key)
        return self._items.pop(key, None)

    def take_all(self) -> list[T]:
        """Stop waiting for every item (draining); the items, in no particular order."""
        items = list(self._items.values())
        for key in self._items:
            self._index.remove(key)
        self._items.clear()
        return items

    async def start_due(self) -> int:
        """Start every item whose time has come, earliest first, as room in the burst allows; how many."""
        started = 0
        try:
            while True:
                first = self._index.next_wake({0})
                if first is None or first > self._clock.now():
                    return started
                if self._reports is not None:
                    self._reports.starting()
                await self._room.acquire()
                keys = self._index.pop_due(0, self._clock.now(), limit=1)
                if not keys:  # taken back while this waited for room
                    self._room.release()
                    return started
                self._start(self._items.pop(keys[0]), self._settler())
                started += 1
        finally:
            if self._reports is not None:
                self._reports.started()

    def _settler(self) -> Settled:
        done = False

        def settled() -> None:
            nonlocal done
            if not done:
                done = True
                self._room.release()
        return settled

    async def run(self, stop: asyncio.Event) -> None:
        """Start items as they come due, until `stop` is set."""
        while not stop.is_set():
            self._changed.clear()
            await self.start_due()
            first = self._index.next_wake({0})
            timeout = None
            if first is not None:
                left = (first - self._clock.now()).total_seconds()
                timeout = next_wait(left)  # coarse, then precise (timer slack)
            changed, stopped = asyncio.ensure_future(self._changed.wait()), asyncio.ensure_future(stop.wait())
            with contextlib.suppress(TimeoutError):
                await asyncio.wait((changed, stopped), timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
            changed.cancel()
            stopped.cancel()

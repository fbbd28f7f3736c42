"""The agent's reports in flight (RunStarted, RunFinished): bounded, and behind the starts of a herd.

Two rules, both learnt from herds of tens of thousands due at one instant on sim agents:

- At most `size` reports wait for their JetStream acks at once; the rest queue here. Unbounded, 30,000 reports
  queued on one connection, their acks timed out, and heartbeats and lease renewals waited behind them.
- While the agent is starting a herd (its waiting index has due attempts), reports wait, for at most `hold`
  seconds. Every report makes the tracker decide a run (a CAS and the server's fsync), on the same cores as
  the starts; interleaved, a 100,000 herd started at the pace the tracker recorded it. A report that waits
  costs nothing but freshness: its attempt keeps its slot until the report is acked, and the tracker does not
  call a run lost while its agent says (`AgentInfo.pending_reports`, this window's `queued`) reports are left.
"""

from __future__ import annotations

import asyncio
from types import TracebackType


class ReportWindow:
    """`async with window:` around each report's publish: waits for quiet (or the hold) and for room."""

    def __init__(self, size: int, hold: float) -> None:
        self._room = asyncio.Semaphore(size)
        self._quiet = asyncio.Event()
        self._quiet.set()
        self._hold = hold
        self._timer: asyncio.TimerHandle | None = None
        """Set from the first `starting()` of a herd to its `started()`: the hold's end."""
        self._queued = 0

    @property
    def quiet(self) -> bool:
        return self._quiet.is_set()

    @property
    def queued(self) -> int:
        """Reports waiting to go out or waiting for their acks."""
        return self._queued

    def starting(self) -> None:
        """Attempts are coming due: reports wait until `started()`, or `hold` seconds from the first call."""
        if self._timer is not None:
            return
        self._quiet.clear()
        # Held no longer than `hold`: an agent that never catches up with its due attempts still reports.
        self._timer = asyncio.get_running_loop().call_later(self._hold, self._quiet.set)

    def started(self) -> None:
        """Nothing due is waiting any more: reports go."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._quiet.set()

    async def __aenter__(self) -> None:
        self._queued += 1
        try:
            await self._quiet.wait()
            await self._room.acquire()
        except BaseException:
            self._queued -= 1
            raise

    async def __aexit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        self._room.release()
        self._queued -= 1

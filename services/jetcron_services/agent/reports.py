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
import contextvars
from types import TracebackType

from msgspec.structs import replace

from jetcron.bus.direct import Direct
from jetcron.core.lifecycle.handoff import BATCH_REQUESTS, taken_each
from jetcron.telemetry.tracing import inject_headers
from jetcron.wire import subjects as s
from jetcron.wire.codec import encode
from jetcron.wire.messages import RunFinished
from jetcron.wire.subjects import HDR_TRACEPARENT

TRACKERS = "trackers"
"""The one taker of direct finish reports (jetcron.bus.direct.Direct's key): any tracker replica answers."""


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


class FinishBatches:
    """Finish reports handed to the trackers directly (`report_by` direct), as many to one request as came while
    the requests before were out (at most `most`), with at most `flying` requests out at once: an idle agent's
    report goes alone and at once, in the one-report form every tracker takes; a burst's go a few dozen to a
    request. One at a time, a burst's requests would have waited past their timeout, so past a few in flight its
    reports went to the events stream (jetcron.core.lifecycle.handoff.DIRECT_REPORTS_MOST), at a stored write each.

    A tracker answers a batch once each report's run record is written or the report dropped, one `1` or `0` per
    report (jetcron.core.lifecycle.handoff.answer_each); a report not taken so, and every report of a request not
    answered so, goes to the stream (the caller publishes it)."""

    def __init__(self, trackers: Direct, agent: str, *, most: int, flying: int = BATCH_REQUESTS) -> None:
        self.trackers = trackers
        self.agent = agent
        self.most = most
        self.flying = flying
        self._waiting: list[tuple[RunFinished, asyncio.Future[bool]]] = []
        """Reports not sent yet, each with its attempt's trace context (RunFinished.traceparent)."""
        self._out = 0
        self._tasks: set[asyncio.Task[None]] = set()

    async def hand(self, finished: RunFinished) -> bool:
        """Whether a tracker took this report (its run record written); False: the stream must carry it."""
        taken: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        traced = replace(finished, traceparent=inject_headers({}).get(HDR_TRACEPARENT, ""))
        self._waiting.append((traced, taken))
        self._send()
        return await taken

    def _send(self) -> None:
        while self._waiting and self._out < self.flying:
            batch, self._waiting = self._waiting[:self.most], self._waiting[self.most:]
            self._out += 1
            # In a context of its own: the request's headers carry no attempt's trace (each report its own).
            self._tasks.add(task := asyncio.create_task(self._request(batch), context=contextvars.Context()))
            task.add_done_callback(self._tasks.discard)

    async def _request(self, batch: list[tuple[RunFinished, asyncio.Future[bool]]]) -> None:
        taken = [False] * len(batch)  # unless answered: the stream's way (a copy of one written is dropped there)
        try:
            taken = await self._ask([finished for finished, _ in batch])
        except Exception:
            pass
        finally:  # cancelled too (the agent stopping): no report is left waiting for an answer
            self._out -= 1
            for (_, future), one in zip(batch, taken, strict=True):
                if not future.done():
                    future.set_result(one)
            self._send()

    async def _ask(self, reports: list[RunFinished]) -> list[bool]:
        if len(reports) == 1:
            one = reports[0]  # the form every tracker takes, its trace in the request's headers as before
            return [await self.trackers.hand(TRACKERS, s.report_subject("finished", self.agent),
                                             encode(replace(one, traceparent="")), traceparent=one.traceparent)]
        reply = await self.trackers.ask(TRACKERS, s.report_subject(s.REPORT_BATCH, self.agent), encode(reports),
                                        messages=len(reports))
        taken = taken_each(reply, len(reports))
        if reply is not None:
            self.trackers.count("taken", sum(taken))
            self.trackers.count("refused", len(taken) - sum(taken))
        return taken

"""Turn agent reports into run changes; stale and duplicate reports are dropped and counted."""

from __future__ import annotations

import asyncio
from collections import defaultdict

from nats.aio.msg import Msg

from jetcron.bus.consume import Drop, Retry
from jetcron.core.errors import IllegalTransition, NotFound, StaleReport
from jetcron.core.models import Run, RunState
from jetcron.core.run_state import RunEvent
from jetcron.core.runs import Change
from jetcron.services.run_tracker.records import Records
from jetcron.telemetry import metrics
from jetcron.telemetry.tracing import extract_context, tracer
from jetcron.wire.codec import decode
from jetcron.wire.messages import RunFinished, RunHandedBack, RunStarted

_tracer = tracer("run_tracker")
_FINISHED = {"succeeded": RunEvent.SUCCEED, "cancelled": RunEvent.CANCEL}


def change_for(kind: str, data: bytes) -> tuple[str, Change]:
    """The run id and the Change an event asks for."""
    if kind == "started":
        e = decode(data, RunStarted)
        return e.run_id, Change(event=RunEvent.START, attempt=e.attempt, token=e.token, agent=e.agent)
    if kind == "finished":
        f = decode(data, RunFinished)
        event = _FINISHED.get(f.outcome, RunEvent.FAIL)
        return f.run_id, Change(event=event, attempt=f.attempt, token=f.token, agent=f.agent, exit_code=f.exit_code,
                                outcome=f.outcome, reason=f.reason)
    if kind == "handed_back":
        h = decode(data, RunHandedBack)
        return h.run_id, Change(event=RunEvent.HAND_BACK, attempt=h.attempt, token=h.token, agent=h.agent,
                                reason=h.reason)
    if kind == "blocked":
        raise Informational()
    raise Drop(f"unknown event kind {kind!r}")


class Informational(Exception):
    """An event for operators and the audit trail that changes no run."""


class EventHandler:
    def __init__(self, records: Records) -> None:
        self.records = records
        # One writer per run inside this replica keeps a run's events in stream order.
        self.locks: defaultdict[str, asyncio.Lock] = defaultdict(asyncio.Lock)

    async def handle(self, msg: Msg) -> None:
        kind = msg.subject.rsplit(".", 1)[-1]
        try:
            run_id, change = change_for(kind, msg.data)
        except Informational:
            return
        except Drop:
            raise
        except Exception as exc:
            raise Drop(f"undecodable {kind} event: {exc}") from exc
        lock = self.locks[run_id]
        async with lock:
            try:
                with _tracer.start_as_current_span(f"run_tracker {change.event}", context=extract_context(msg.headers),
                                                   attributes={"messaging.system": "nats", "messaging.operation": "process",
                                                               "jetcron.run_id": run_id}):
                    await self._apply(run_id, change)
            finally:
                if not lock._waiters:  # type: ignore[attr-defined]
                    self.locks.pop(run_id, None)

    async def _apply(self, run_id: str, change: Change) -> None:
        early = False

        def make(run: Run) -> Change | None:
            nonlocal early
            # A finish that overtook its start (another replica holds the start): wait, don't drop.
            if (run.state is RunState.ASSIGNED and change.event in (RunEvent.SUCCEED, RunEvent.HAND_BACK)
                    and change.attempt == run.attempt):
                early = True
                return None
            return change

        try:
            await self.records.change(run_id, make)
        except StaleReport:
            metrics.REPORTS_DROPPED.labels(reason="stale").inc()
            return
        except IllegalTransition:
            metrics.REPORTS_DROPPED.labels(reason="duplicate_or_late").inc()
            return
        except NotFound:
            metrics.REPORTS_DROPPED.labels(reason="unknown_run").inc()
            return
        if early:
            raise Retry(0.2, "finish arrived before start")

"""Turn agent reports into run changes; stale and duplicate reports are dropped and counted."""

from __future__ import annotations

import asyncio
import contextlib
from collections import defaultdict
from collections.abc import Awaitable, Callable

from opentelemetry.context import Context as TraceContext

from jetcron import faults
from jetcron.bus.consume import Drop, Retry
from jetcron.bus.direct import Taker
from jetcron.bus.ports import Message
from jetcron.core.errors import IllegalTransition, JetcronError, NotFound, StaleReport
from jetcron.core.lifecycle.handoff import answer_each
from jetcron.core.lifecycle.run_state import RunEvent
from jetcron.core.lifecycle.runs import Change
from jetcron.core.models import Run, RunState
from jetcron.telemetry import metrics
from jetcron.telemetry.tracing import extract_context, messaging_span, tracer
from jetcron.wire import subjects as s
from jetcron.wire.codec import decode
from jetcron.wire.messages import EVENT_KINDS, HANDOFF_TAKEN, RunFinished, RunHandedBack, RunStarted
from jetcron_services.run_tracker.records import Records

_tracer = tracer("run_tracker")
_FINISHED = {"succeeded": RunEvent.SUCCEED, "cancelled": RunEvent.CANCEL}
NOT_STARTED = "not_started"


Decided = tuple[str, Change, Change | None]
"""The run id, the Change an event asks for, and for a finish the start it implies."""


def change_for(kind: str, data: bytes, source: str = "") -> Decided:
    """What an event asks for. `source` is the agent the subject names (the one its credential allows): a report
    about another agent is a forgery."""
    return _from(source, kind, _change_for(kind, data))


def _from(source: str, kind: str, decided: Decided) -> Decided:
    run_id, change, _ = decided
    if source and change.agent != source:
        metrics.child(metrics.REPORTS_DROPPED, reason="forged").inc()
        raise Drop(f"{kind} report for {run_id} names agent {change.agent} but was sent by {source}")
    return decided


def _finish(f: RunFinished) -> Decided:
    event = _FINISHED.get(f.outcome, RunEvent.FAIL)
    start = None if f.started_at is None else Change(
        event=RunEvent.START, attempt=f.attempt, token=f.token, agent=f.agent, at=f.started_at)
    return f.run_id, Change(event=event, attempt=f.attempt, token=f.token, agent=f.agent, exit_code=f.exit_code,
                            outcome=f.outcome, reason=f.reason, at=f.at), start


def _change_for(kind: str, data: bytes) -> Decided:
    if kind == "started":
        e = decode(data, RunStarted)
        return e.run_id, Change(event=RunEvent.START, attempt=e.attempt, token=e.token, agent=e.agent, at=e.at), None
    if kind == "finished":
        return _finish(decode(data, RunFinished))
    if kind == "handed_back":
        h = decode(data, RunHandedBack)
        # outcome marks a hand-back of an attempt that never started: no start report will come for it
        return h.run_id, Change(event=RunEvent.HAND_BACK, attempt=h.attempt, token=h.token, agent=h.agent,
                                reason=h.reason, outcome="" if h.started else NOT_STARTED), None
    if kind in EVENT_KINDS:
        raise Informational()  # any other kind the wire names is for the audit trail
    raise Drop(f"unknown event kind {kind!r}")


class Informational(JetcronError):
    """An event for operators and the audit trail that changes no run: the handler acks it and does nothing. An
    outcome of the tracker's own decoding, as bus.consume's Drop is of a handler's."""


class EventHandler:
    def __init__(self, records: Records) -> None:
        self.records = records
        # One writer per run inside this replica keeps a run's events in stream order.
        self.locks: defaultdict[str, asyncio.Lock] = defaultdict(asyncio.Lock)

    async def handle(self, msg: Message) -> None:
        kind, source = s.parse_event_subject(msg.subject)
        try:
            decided = change_for(kind, msg.data, source)
        except Informational:
            return
        except Drop:
            raise
        except Exception as exc:
            raise Drop(f"undecodable {kind} event: {exc}") from exc
        await self._decided(msg.subject, decided, extract_context(msg.headers))

    async def finished_each(self, subject: str, reports: list[RunFinished]) -> list[bool]:
        """Finish reports handed over in one request (`subject` names their agent), applied at once: whether each
        was taken, its run record written or the report dropped (as `handle` then acks it); False where it must
        wait (a finish ahead of its start) or its write failed, so that the agent sends it to the stream."""
        _, source = s.parse_event_subject(subject)

        async def one(f: RunFinished) -> bool:
            try:
                await self._decided(subject, _from(source, "finished", _finish(f)),
                                    extract_context({s.HDR_TRACEPARENT: f.traceparent} if f.traceparent else None))
            except Drop:
                return True
            except Exception:
                return False
            return True

        return list(await asyncio.gather(*(one(f) for f in reports)))

    async def _decided(self, subject: str, decided: Decided, parent: TraceContext) -> None:
        run_id, change, start = decided
        faults.point("tracker.after_receive")  # chaos: event taken, run record not yet written
        lock = self.locks[run_id]
        async with lock:
            try:
                with messaging_span(_tracer, "process", subject, parent=parent, run_id=run_id,
                                    attempt=change.attempt):
                    await self._apply(run_id, change, start)
            finally:
                if not lock._waiters:
                    self.locks.pop(run_id, None)

    async def _apply(self, run_id: str, change: Change, start: Change | None) -> None:
        early = False

        def make(run: Run) -> list[Change] | None:
            nonlocal early
            early = False  # decided afresh on each copy of the record (Records.change may call twice)
            if run.state is RunState.ASSIGNED and change.attempt == run.attempt and change.event is not RunEvent.START:
                if start is not None:
                    # A quick run reported once: apply its start and its end in one write.
                    return [start, change]
                if change.event is RunEvent.SUCCEED or (change.event is RunEvent.HAND_BACK
                                                        and change.outcome != NOT_STARTED):
                    # A finish that overtook its start (another replica holds the start): wait, don't drop.
                    early = True
                    return None
            return [change]

        try:
            await self.records.change(run_id, make)
        except StaleReport:
            metrics.child(metrics.REPORTS_DROPPED, reason="stale").inc()
            return
        except IllegalTransition:
            metrics.child(metrics.REPORTS_DROPPED, reason="duplicate_or_late").inc()
            return
        except NotFound:
            metrics.child(metrics.REPORTS_DROPPED, reason="unknown_run").inc()
            return
        if early:
            raise Retry(0.2, "finish arrived before start")


DIRECT_IN_FLIGHT = 256
"""Direct reports a tracker applies at once, as many as its events consumer does (jetcron.bus.direct.Taker's `most`)."""


BATCHES_IN_FLIGHT = 16
"""Requests of several finish reports a tracker applies at once (each up to the agents' `agent_report_batch`)."""


def direct_batches(handler: EventHandler, most: int = BATCHES_IN_FLIGHT) -> Taker:
    """Finish reports handed over several to a request (services/jetcron_services/agent/reports.FinishBatches), each
    applied as `direct_reports` applies one, answered with one `1` or `0` per report
    (jetcron.core.lifecycle.handoff.answer_each). One that cannot be read is answered refused: its agent sends every
    report of it to the stream."""

    async def decide(msg: Message) -> bytes:
        return answer_each(await handler.finished_each(msg.subject, decode(msg.data, list[RunFinished])))

    return Taker(decide, fault="tracker.report_answer", most=most)


def report_router(handler: EventHandler) -> Callable[[Message], Awaitable[None]]:
    """The trackers' one subscription to the direct reports: batches to `direct_batches`, the rest one each."""
    one, many = direct_reports(handler), direct_batches(handler)

    async def route(msg: Message) -> None:
        await (many if s.parse_event_subject(msg.subject)[0] == s.REPORT_BATCH else one).on_request(msg)

    return route


def direct_reports(handler: EventHandler, most: int = DIRECT_IN_FLIGHT) -> Taker:
    """Reports handed to the trackers directly (`report_by` direct): each is applied as one from the stream is,
    and answered `taken` once the run record is written, or the report is dropped (stale, forged, a duplicate: the
    stream would drop it too). One that must wait (a finish ahead of its start) or whose write failed is answered
    refused, and one a tracker dies on not at all: the agent then publishes it to the events stream, whose
    consumer retries and redelivers."""

    async def decide(msg: Message) -> bytes:
        with contextlib.suppress(Drop):
            await handler.handle(msg)
        return HANDOFF_TAKEN

    return Taker(decide, fault="tracker.report_answer", most=most)

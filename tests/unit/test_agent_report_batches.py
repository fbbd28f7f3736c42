"""Finish reports handed to the trackers several to a request (services/jetcron_services/agent/reports.FinishBatches): a
lone one goes alone in the one-report form, those that come while requests are out go together; each is taken as its
tracker's answer says (jetcron.core.lifecycle.handoff), and an answer that is not one per report takes none."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import pytest
from opentelemetry import context as otel_context
from twin_support import twin_context

from jetcron.bus.direct import Direct
from jetcron.core.lifecycle.handoff import answer_each, taken_each
from jetcron.telemetry.tracing import extract_context
from jetcron.wire import subjects as s
from jetcron.wire.codec import decode
from jetcron.wire.messages import HANDOFF_REFUSED, HANDOFF_TAKEN, RunFinished
from jetcron_services.agent.reports import FinishBatches

T0 = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(("reply", "n", "taken"), [
    (b"101", 3, [True, False, True]),
    (b"1", 1, [True]),
    (b"10", 3, [False, False, False]),  # not one per report
    (HANDOFF_TAKEN, 5, [False] * 5),  # a tracker from before: `taken` to a batch it could not read
    (HANDOFF_REFUSED, 7, [False] * 7),
    (None, 2, [False, False]),  # no answer
])
def test_only_an_answer_of_one_digit_per_report_takes_any(reply: bytes | None, n: int, taken: list[bool]) -> None:
    assert taken_each(reply, n) == taken


def test_an_answer_says_each_report_in_order() -> None:
    assert answer_each([True, False, False, True]) == b"1001"
    assert taken_each(answer_each([False, True]), 2) == [False, True]


def _finished(i: int) -> RunFinished:
    return RunFinished(run_id=f"j.{i}", attempt=1, token=7, agent="a", outcome="succeeded", exit_code=0, at=T0)


class Trackers:
    """Serves the direct reports on the twin's rpc: holds each request until `release` (so that more queue behind
    it), then answers it with `answer(reports)`."""

    def __init__(self, answer: Any) -> None:
        self.answer = answer
        self.got: list[tuple[str, list[str], str]] = []
        """(subject, run ids, traceparent header) per request."""
        self.traces: list[str] = []
        """Each report's own traceparent, in the order they came."""
        self.release = asyncio.Event()

    async def on_request(self, msg: Any) -> None:
        kind, _ = s.parse_event_subject(msg.subject)
        reports = decode(msg.data, list[RunFinished]) if kind == s.REPORT_BATCH else [decode(msg.data, RunFinished)]
        self.got.append((msg.subject, [r.run_id for r in reports], (msg.headers or {}).get(s.HDR_TRACEPARENT, "")))
        self.traces += [r.traceparent for r in reports]
        await self.release.wait()
        await msg.respond(self.answer(kind, reports))


def _answer_all_but_j2(kind: str, reports: list[RunFinished]) -> bytes:
    if kind != s.REPORT_BATCH:
        return HANDOFF_TAKEN
    return answer_each([r.run_id != "j.2" for r in reports])


async def _batches(answer: Any, most: int = 32) -> tuple[FinishBatches, Trackers]:
    ctx = twin_context("agent")
    trackers = Trackers(answer)
    await ctx.rpc.serve(s.REPORT_ALL, trackers.on_request, queue="run_tracker")
    return FinishBatches(Direct(ctx.rpc, "report", timeout=5), "a", most=most, flying=1), trackers


async def test_a_lone_report_goes_alone_in_the_one_report_form_with_its_trace() -> None:
    batches, trackers = await _batches(_answer_all_but_j2)
    trackers.release.set()
    assert await batches.hand(_finished(0)) is True
    [(subject, runs, _)] = trackers.got
    assert (subject, runs) == (s.report_subject("finished", "a"), ["j.0"])


async def test_reports_that_come_while_a_request_is_out_go_together_each_taken_as_answered() -> None:
    batches, trackers = await _batches(_answer_all_but_j2)
    # Given one report out (its answer held) and four more handed meanwhile
    hands = [asyncio.create_task(batches.hand(_finished(i))) for i in range(5)]
    while not trackers.got:
        await asyncio.sleep(0)
    # When the first answer comes
    trackers.release.set()
    # Then the four went in one request of the batch kind, and each is taken as its answer says (j.2 is not: the
    # agent sends it to the stream)
    assert await asyncio.gather(*hands) == [True, True, False, True, True]
    assert [(subject, runs) for subject, runs, _ in trackers.got] == [
        (s.report_subject("finished", "a"), ["j.0"]),
        (s.report_subject(s.REPORT_BATCH, "a"), ["j.1", "j.2", "j.3", "j.4"])]


async def test_a_batch_takes_at_most_its_bound() -> None:
    batches, trackers = await _batches(_answer_all_but_j2, most=2)
    hands = [asyncio.create_task(batches.hand(_finished(i))) for i in range(6)]
    while not trackers.got:
        await asyncio.sleep(0)
    trackers.release.set()
    await asyncio.gather(*hands)
    assert [runs for _, runs, _ in trackers.got] == [["j.0"], ["j.1", "j.2"], ["j.3", "j.4"], ["j.5"]]


async def test_a_tracker_that_knows_no_batches_takes_none_of_them() -> None:
    # A tracker from before answers `taken` to what it could not read (it drops an unknown kind)
    batches, trackers = await _batches(lambda kind, reports: HANDOFF_TAKEN)
    hands = [asyncio.create_task(batches.hand(_finished(i))) for i in range(3)]
    while not trackers.got:
        await asyncio.sleep(0)
    trackers.release.set()
    assert await asyncio.gather(*hands) == [True, False, False]


async def _traced(batches: FinishBatches, i: int, traceparent: str) -> bool:
    token = otel_context.attach(extract_context({s.HDR_TRACEPARENT: traceparent}))
    try:
        return await batches.hand(_finished(i))
    finally:
        otel_context.detach(token)


async def test_each_report_carries_its_attempts_trace_a_batch_in_the_report_a_lone_one_in_the_header() -> None:
    batches, trackers = await _batches(_answer_all_but_j2)
    traces = [f"00-{i:032x}-b7ad6b7169203331-01" for i in range(1, 4)]
    hands = [asyncio.create_task(_traced(batches, i, traces[i])) for i in range(3)]
    while not trackers.got:
        await asyncio.sleep(0)
    trackers.release.set()
    await asyncio.gather(*hands)
    [(_, _, lone), (_, runs, header)] = trackers.got
    assert (lone, runs, header) == (traces[0], ["j.1", "j.2"], "")
    assert trackers.traces == ["", traces[1], traces[2]]  # the lone one's is in its header, not its body


async def test_a_request_cancelled_leaves_no_report_waiting_each_goes_to_the_stream() -> None:
    # Given reports in requests whose answers never come (held), as the agent stops
    batches, trackers = await _batches(_answer_all_but_j2, most=2)
    first = asyncio.create_task(batches.hand(_finished(0)))
    while not trackers.got:
        await asyncio.sleep(0)
    rest = [asyncio.create_task(batches.hand(_finished(i))) for i in (1, 2)]
    await asyncio.sleep(0)
    # When its requests are cancelled (the first's end sends the next, which is cancelled too)
    for held in (1, 2):
        while len(trackers.got) < held:
            await asyncio.sleep(0)
        for task in list(batches._tasks):
            task.cancel()
    # Then every report is answered "not taken" (the stream's way), none waits on
    assert await asyncio.wait_for(asyncio.gather(first, *rest), 5) == [False, False, False]
    assert [runs for _, runs, _ in trackers.got] == [["j.0"], ["j.1", "j.2"]]

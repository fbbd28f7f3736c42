"""Finish reports handed to the trackers directly (services/jetcron_services/run_tracker/events.direct_reports) on the
bus's twins: answered `taken` only once the run record is written, or when the report is one the stream would drop too;
`refused` when it must wait for its start, or past the reports a tracker applies at once; and the agent's side
(jetcron.bus.direct.Direct) publishes nothing to the stream for a report taken."""

from __future__ import annotations

import asyncio
import random
from datetime import timedelta

from twin_support import twin_context

from jetcron.bus.direct import Direct, Taker
from jetcron.bus.memory import MemoryMessage, MemoryRpc
from jetcron.core.lifecycle.run_state import RunEvent
from jetcron.core.lifecycle.runs import Change, apply, new_run
from jetcron.core.models import JobSpec, Run, RunState
from jetcron.wire import subjects as s
from jetcron.wire.codec import encode
from jetcron.wire.messages import HANDOFF_REFUSED, HANDOFF_TAKEN, RunFinished
from jetcron_services.run_tracker.events import EventHandler, direct_reports
from jetcron_services.run_tracker.records import Records
from jetcron_services.runtime import Context

SPEC = JobSpec(name="nightly", command=["true"])


async def assigned(ctx: Context) -> Run:
    now = ctx.clock.now()
    run = new_run(SPEC, run_id="nightly.r1", state=RunState.SCHEDULED, scheduled_at=now, due_at=now, now=now)
    run = apply(run, Change(event=RunEvent.ASSIGN, agents=["agent-1"]), now)
    await ctx.runs.create(run.run_id, run)
    return run


def finish(ctx: Context, *, started: bool = True, agent: str = "agent-1", token: int = 7) -> RunFinished:
    now = ctx.clock.now()
    return RunFinished(run_id="nightly.r1", attempt=1, token=token, agent=agent, outcome="succeeded", exit_code=0,
                       at=now + timedelta(seconds=1), started_at=now if started else None)


async def answer(reports: Taker, report: RunFinished, source: str = "agent-1") -> bytes:
    msg = MemoryMessage(s.report_subject("finished", source), encode(report))
    await reports.on_request(msg)
    await asyncio.wait_for(msg.responded.wait(), 5)
    return msg.responses[0]


def tracker() -> tuple[Context, Taker]:
    ctx = twin_context("run_tracker")
    return ctx, direct_reports(EventHandler(Records(ctx, random.Random(0))))


async def test_a_finish_is_answered_taken_once_the_record_is_written() -> None:
    ctx, reports = tracker()
    await assigned(ctx)
    assert await answer(reports, finish(ctx)) == HANDOFF_TAKEN
    stored, _ = await ctx.runs.get("nightly.r1")
    assert (stored.state, stored.token, stored.attempt) == (RunState.SUCCEEDED, 7, 1)
    # The same report again (its answer was late, and the stream's copy came too) changes nothing and is taken
    assert await answer(reports, finish(ctx)) == HANDOFF_TAKEN
    assert (await ctx.runs.get("nightly.r1"))[0] == stored


async def test_a_finish_ahead_of_its_start_is_refused_and_writes_nothing() -> None:
    ctx, reports = tracker()
    run = await assigned(ctx)
    # A finish that carries no start while the record is still `assigned`: its start report is on the stream
    assert await answer(reports, finish(ctx, started=False)) == HANDOFF_REFUSED
    assert (await ctx.runs.get("nightly.r1"))[0] == run


async def test_a_report_naming_another_agent_is_dropped_and_taken() -> None:
    ctx, reports = tracker()
    run = await assigned(ctx)
    assert await answer(reports, finish(ctx, agent="agent-1"), source="agent-2") == HANDOFF_TAKEN
    assert (await ctx.runs.get("nightly.r1"))[0] == run


async def test_past_the_reports_in_flight_a_report_is_refused_at_once() -> None:
    ctx, _ = tracker()
    await assigned(ctx)
    reports = direct_reports(EventHandler(Records(ctx, random.Random(0))), most=0)
    assert await answer(reports, finish(ctx)) == HANDOFF_REFUSED
    assert (await ctx.runs.get("nightly.r1"))[0].state is RunState.ASSIGNED


async def test_an_agent_hands_a_finish_to_a_tracker_and_nothing_goes_to_the_stream() -> None:
    ctx, reports = tracker()
    await assigned(ctx)
    rpc = MemoryRpc()
    await rpc.serve(s.REPORT_ALL, reports.on_request, queue="run_tracker")
    direct = Direct(rpc, "report", timeout=5)
    assert await direct.hand("trackers", s.report_subject("finished", "agent-1"), encode(finish(ctx))) is True
    assert (await ctx.runs.get("nightly.r1"))[0].state is RunState.SUCCEEDED
    # With no tracker serving the subject it is not taken: the agent publishes to the stream
    assert await Direct(MemoryRpc(), "report", timeout=5).hand(
        "trackers", s.report_subject("finished", "agent-1"), encode(finish(ctx))) is False

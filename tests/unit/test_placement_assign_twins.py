"""The placement leader's assignment (services/jetcron_services/placement/service.py) on the bus's twins, which
tests/contract holds to the server: a PlaceRun is held unacked until its run is assigned by a compare-and-set on its
record, then one AssignRun goes to the agent and the PlaceRun is acked; a run that moved on meanwhile is neither
assigned nor sent, and a redelivered PlaceRun of an assigned run changes nothing."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import msgspec
import pytest
from twin_support import twin_context

from jetcron.bus.consume import Hold
from jetcron.bus.memory import MemoryPublisher, MemoryQueue
from jetcron.core.lifecycle.runs import new_run
from jetcron.core.models import AgentInfo, JobSpec, Priority, Resources, Run, RunState
from jetcron.wire import subjects as s
from jetcron.wire.codec import decode, encode
from jetcron.wire.messages import AssignRun, place_run_for
from jetcron_services.placement.held import TAKE_UP_BATCH
from jetcron_services.placement.service import Placer
from jetcron_services.placement.view import View
from jetcron_services.runtime import Context

SPEC = JobSpec(name="nightly", command=["true"], resources=Resources(cpu=1, memory_mb=256))


async def setup() -> tuple[Context, Placer, MemoryQueue, Run]:
    """A leader on the twins with one agent, and one scheduled run whose PlaceRun waits in the queue."""
    ctx = twin_context("placement")
    now = ctx.clock.now()
    view = View(ctx)
    view.upsert_agent(AgentInfo(agent_id="agent-1", cpu=4, memory_mb=4096, heartbeat_at=now, started_at=now))
    run = new_run(SPEC, run_id="nightly.r1", state=RunState.SCHEDULED, scheduled_at=now, due_at=now, now=now)
    await ctx.runs.create(run.run_id, run)
    queue = MemoryQueue()
    await queue.publish(s.place_subject(SPEC.priority), encode(place_run_for(run)), msg_id="nightly.r1/1/place")
    return ctx, Placer(ctx, view), queue, run


def sent(ctx: Context) -> list[AssignRun]:
    assert isinstance(ctx.publisher, MemoryPublisher)
    return [decode(p.data, AssignRun) for p in ctx.publisher.on(s.assign_subject("*"))]


async def test_a_held_run_is_assigned_by_its_record_then_sent_to_its_agent_and_its_message_acked() -> None:
    ctx, placer, queue, run = await setup()
    # When the leader takes the PlaceRun, it holds it unacked
    (msg,) = await queue.fetch(1, 1)
    with pytest.raises(Hold):
        await placer.take(msg)
    assert sent(ctx) == [] and queue.unsettled == [msg.seq]

    # And its pass assigns the run: the record first, then one AssignRun, then the ack
    await placer.place_once()
    stored, _ = await ctx.runs.get(run.run_id)
    assert (stored.state, stored.agents, stored.attempt) == (RunState.ASSIGNED, ["agent-1"], 1)
    assert [(a.run_id, a.agent, a.attempt) for a in sent(ctx)] == [("nightly.r1", "agent-1", 1)]
    assert queue.unsettled == []

    # A redelivery of the same PlaceRun (its ack lost) is acked and changes nothing
    await placer.take(msg)
    await placer.place_once()
    assert len(sent(ctx)) == 1 and (await ctx.runs.get(run.run_id))[0] == stored


async def test_a_run_cancelled_while_held_is_neither_assigned_nor_sent() -> None:
    ctx, placer, queue, run = await setup()
    (msg,) = await queue.fetch(1, 1)
    with pytest.raises(Hold):
        await placer.take(msg)
    # Given the run was cancelled while it waited (the api's compare-and-set came first)
    cancelled = Run(**{**{f: getattr(run, f) for f in run.__struct_fields__}, "state": RunState.CANCELLED,
                       "finished_at": ctx.clock.now() + timedelta(seconds=1)})
    await ctx.runs.put(run.run_id, cancelled)

    # When the pass reaches it, then the record refuses the assignment: nothing is sent, the message is acked
    await placer.place_once()
    assert (await ctx.runs.get(run.run_id))[0].state is RunState.CANCELLED
    assert sent(ctx) == [] and queue.unsettled == []
    # and its place is free again for the next run
    assert placer.view.placed.get(run.run_id) is None


async def leading(ctx: Context, placer: Placer) -> None:
    """The leader follows the records as it does from its takeover, the view fed the runs bucket's records."""
    for key in await ctx.runs.keys():
        run, revision = await ctx.runs.get(key)
        placer.view.on_record(key, run, revision)
    await placer.follow_records()


async def test_a_record_alone_hands_its_run_to_the_leader_and_a_late_place_run_is_acked_at_once() -> None:
    # Given a scheduled record and no PlaceRun taken (the record is the hand-off)
    ctx, placer, queue, run = await setup()
    await leading(ctx, placer)
    assert list(placer.held) == [run.run_id]

    # When a PlaceRun of the same attempt comes (a re-drive, or from the previous release), it is acked at once: the
    # held record is what any leader takes up, and the message is not kept (nor touched every 10 s)
    (msg,) = await queue.fetch(1, 1)
    await placer.take(msg)  # returns (the consumer acks it) rather than raising Hold (kept unacked)
    assert [(cmd.run_id, held_msg) for cmd, held_msg, _ in placer.held.values()] == [(run.run_id, None)]

    # Then one pass assigns the run once
    await placer.place_once()
    assert [(a.run_id, a.attempt) for a in sent(ctx)] == [("nightly.r1", 1)]
    # And its record coming back assigned, or scheduled again at the same attempt, holds nothing again
    stored, revision = await ctx.runs.get(run.run_id)
    placer.view.on_record(run.run_id, stored, revision)
    placer.offered(place_run_for(run))
    assert placer.held == {} and len(sent(ctx)) == 1


async def test_a_retry_record_replaces_the_attempt_held_before_it() -> None:
    # Given attempt 1 held from its PlaceRun (no agent has room: the only agent is away)
    ctx, placer, queue, run = await setup()
    placer.view.forget_agent("agent-1")
    (msg,) = await queue.fetch(1, 1)
    with pytest.raises(Hold):
        await placer.take(msg)

    # When the record of attempt 2 arrives from the runs watch
    retry = Run(**{**{f: getattr(run, f) for f in run.__struct_fields__}, "attempt": 2})
    await ctx.runs.put(run.run_id, retry)
    await leading(ctx, placer)

    # Then attempt 2 is what waits, and attempt 1's message is acked
    assert [(cmd.run_id, cmd.attempt, held_msg) for cmd, held_msg, _ in placer.held.values()] == [
        ("nightly.r1", 2, None)]
    await asyncio.sleep(0)  # the ack is the watch callback's background task
    assert queue.unsettled == []
    assert placer.view.queue.waiting_by_tenant() == {"default": 1}


async def test_a_held_run_whose_record_is_cancelled_leaves_the_queue_at_once() -> None:
    # Given a run held from its message (taken before the runs watch delivered its record) and then its record,
    # with no agent that has room
    ctx, placer, queue, run = await setup()
    placer.view.forget_agent("agent-1")
    (msg,) = await queue.fetch(1, 1)
    with pytest.raises(Hold):
        await placer.take(msg)
    await leading(ctx, placer)

    # When its record is cancelled (the api's compare-and-set) and the runs watch delivers it
    cancelled = Run(**{**{f: getattr(run, f) for f in run.__struct_fields__}, "state": RunState.CANCELLED,
                       "finished_at": ctx.clock.now() + timedelta(seconds=1)})
    revision = await ctx.runs.put(run.run_id, cancelled)
    placer.view.on_record(run.run_id, cancelled, revision)

    # Then it no longer waits nor counts as pending, and its message is acked; an agent coming gets nothing
    await asyncio.sleep(0)
    assert placer.held == {} and placer.view.queue.waiting_by_tenant() == {} and queue.unsettled == []
    now = ctx.clock.now()
    placer.view.upsert_agent(AgentInfo(agent_id="agent-2", cpu=4, memory_mb=4096, heartbeat_at=now, started_at=now))
    await placer.place_once()
    assert sent(ctx) == []


async def test_records_past_the_kept_window_are_assigned_by_reading_each_back_once() -> None:
    # Given a view that keeps one waiting record decoded, and three scheduled records on an agent with room for all
    ctx = twin_context("placement")
    now = ctx.clock.now()
    view = View(ctx)
    view.records_kept = 1
    view.upsert_agent(AgentInfo(agent_id="agent-1", cpu=4, memory_mb=4096, heartbeat_at=now, started_at=now))
    runs = [new_run(SPEC, run_id=f"nightly.r{i}", state=RunState.SCHEDULED, scheduled_at=now, due_at=now, now=now)
            for i in (1, 2, 3)]
    for run in runs:
        await ctx.runs.create(run.run_id, run)
    placer = Placer(ctx, view)
    await leading(ctx, placer)

    # Then the first keeps its record, the others only the PlaceRun they stand for
    assert [view.copy(r.run_id) is not None for r in runs] == [True, False, False]
    assert [view.scheduled[r.run_id].cmd for r in runs] == [place_run_for(r) for r in runs]
    assert sorted(placer.held) == [r.run_id for r in runs]

    # When one pass assigns them, the two past the window are read back once each, the kept one is not read
    reads: list[str] = []
    get = ctx.runs.get

    async def counted(key: str) -> tuple[Run, int]:
        reads.append(key)
        return await get(key)

    ctx.runs.get = counted  # type: ignore[method-assign]
    await placer.place_once()
    assert sorted(reads) == ["nightly.r2", "nightly.r3"]
    for run in runs:
        stored, revision = await ctx.runs.get(run.run_id)
        assert (stored.state, stored.agents) == (RunState.ASSIGNED, ["agent-1"])
        view.on_record(run.run_id, stored, revision)
    assert sorted(a.run_id for a in sent(ctx)) == [r.run_id for r in runs]

    # And the window's place is free again once its record left `scheduled`: the next record is kept
    later = new_run(SPEC, run_id="nightly.r4", state=RunState.SCHEDULED, scheduled_at=now, due_at=now, now=now)
    revision = await ctx.runs.create(later.run_id, later)
    view.on_record(later.run_id, later, revision)
    assert list(view.scheduled) == ["nightly.r4"] and view.copy("nightly.r4") == (later, revision)


async def test_a_new_leader_takes_up_a_herd_of_waiting_records_in_batches_letting_the_loop_run_between() -> None:
    # Given 5,000 records waiting for placement when a leader takes over
    ctx = twin_context("placement")
    now = ctx.clock.now()
    view = View(ctx)
    for i in range(5_000):
        run = new_run(SPEC, run_id=f"herd{i:04d}.r1", state=RunState.SCHEDULED, scheduled_at=now, due_at=now,
                      now=now)
        view.on_record(run.run_id, run, i + 1)
    placer = Placer(ctx, view)

    # When it takes them up beside the rest of the loop (the lease's renewals among it)
    task = asyncio.ensure_future(placer.follow_records())
    await asyncio.sleep(0)  # the task's first turn

    # Then the loop ran after the first batch, not after the whole herd, and every record is held in the end
    assert len(placer.held) == TAKE_UP_BATCH
    # A record that left `scheduled` meanwhile (cancelled) is not taken up
    view.on_record("herd4999.r1", None, 5_001)
    assert await task == 5_000
    assert len(placer.held) == 4_999 and "herd4999.r1" not in placer.held


async def test_a_new_revision_of_a_waiting_attempt_keeps_the_place_run_the_leader_holds() -> None:
    # Given a held run whose record comes again at a new revision of the same attempt (its waiting reason written)
    ctx, placer, _, run = await setup()
    await leading(ctx, placer)
    held = placer.held[run.run_id][0]
    placer.view.on_record(run.run_id, run, 99)

    # Then the view and the leader share the one PlaceRun; a new priority makes a new one, and the run moves
    assert placer.view.scheduled[run.run_id].cmd is held and placer.view.copy(run.run_id) == (run, 99)
    urgent = Run(**{**{f: getattr(run, f) for f in run.__struct_fields__},
                    "spec": msgspec.structs.replace(SPEC, priority=Priority.HIGH)})
    placer.view.on_record(run.run_id, urgent, 100)
    assert placer.view.scheduled[run.run_id].cmd.priority is Priority.HIGH
    assert placer.held[run.run_id][0].priority is Priority.HIGH

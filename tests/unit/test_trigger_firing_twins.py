"""The trigger's firing (services/jetcron_services/trigger/firing.py) on the bus's twins, which tests/contract holds to
the server: each occurrence is recorded once through the fire gate (its `scheduled` record is its hand-off to
placement: no PlaceRun), whatever crash and retry come between; the cursor moves only past what was recorded. The
crash and the race are the server-side chaos tests' (tests/chaos/test_chaos_trigger*.py); here they are steps a test
takes."""

from __future__ import annotations

import asyncio
import random
from datetime import UTC, datetime, timedelta

from twin_support import twin_context

from jetcron.bus.memory import MemoryPublisher
from jetcron.core.ids import run_id
from jetcron.core.models import JobRecord, JobSpec, Run, RunState, Schedule, ScheduleKind
from jetcron.wire import subjects as s
from jetcron.wire.codec import decode
from jetcron.wire.messages import PlaceRun
from jetcron_services.runtime import Context
from jetcron_services.trigger.firing import Firer

T0 = datetime(2026, 12, 5, 12, 0, tzinfo=UTC)
EVERY_MINUTE = JobSpec(name="tick", command=["true"], schedule=Schedule(kind=ScheduleKind.EVERY, every_seconds=60))


def published(ctx: Context) -> MemoryPublisher:
    assert isinstance(ctx.publisher, MemoryPublisher)
    return ctx.publisher


async def recorded(ctx: Context) -> list[Run]:
    return sorted([(await ctx.runs.get(key))[0] for key in await ctx.runs.keys()], key=lambda r: r.scheduled_at)


def handed(ctx: Context) -> list[tuple[str, str]]:
    """The PlaceRuns published, as (message id, run id)."""
    return [(p.msg_id, decode(p.data, PlaceRun).run_id) for p in published(ctx).on(s.PLACE_ALL)]


async def test_each_due_occurrence_is_recorded_once_by_its_record_alone_and_the_cursor_moves_past_it() -> None:
    # Given an every-minute job created at T0, fired on time twice
    ctx = twin_context("trigger")
    record = JobRecord(spec=EVERY_MINUTE, created_at=T0, updated_at=T0)
    _, cursor = await Firer(ctx, random.Random(1)).fire(record, None, T0 + timedelta(seconds=1))
    plan, cursor = await Firer(ctx, random.Random(1)).fire(record, cursor, T0 + timedelta(seconds=61))

    # Then each occurrence is a run, scheduled at its minute, handed to placement by that record alone (placement
    # follows the runs bucket): no PlaceRun is published
    runs = await recorded(ctx)
    assert [(r.scheduled_at, r.state) for r in runs] == [(T0, RunState.SCHEDULED),
                                                        (T0 + timedelta(minutes=1), RunState.SCHEDULED)]
    assert [r.run_id for r in runs] == [run_id(EVERY_MINUTE.key, r.scheduled_at) for r in runs]
    assert handed(ctx) == []
    # And the cursor stands on the last one recorded
    assert cursor is not None and cursor[0].last == T0 + timedelta(minutes=1)
    assert cursor[0].last_run == runs[-1].run_id and len(plan.fires) == 1


async def test_a_trigger_that_died_before_moving_its_cursor_fires_again_and_nothing_is_recorded_twice() -> None:
    # Given an occurrence recorded (handed on) by a trigger that died before its cursor was written
    ctx = twin_context("trigger")
    record = JobRecord(spec=EVERY_MINUTE, created_at=T0, updated_at=T0)
    await Firer(ctx, random.Random(1)).fire(record, None, T0 + timedelta(seconds=1))
    await ctx.cursors.delete(EVERY_MINUTE.key)
    sent_before = len(published(ctx).published)

    # When its next life fires the job from the old cursor, then a minute later
    _, cursor = await Firer(ctx, random.Random(2)).fire(record, None, T0 + timedelta(seconds=2))
    runs = await recorded(ctx)
    _, cursor = await Firer(ctx, random.Random(3)).fire(record, cursor, T0 + timedelta(seconds=61))

    # Then the fire gate kept the occurrence once, and nothing was published for it again (the record that met the
    # gate is the hand-off already)
    assert [r.scheduled_at for r in runs] == [T0] and len(published(ctx).published) == sent_before
    # and only the next minute is new
    runs = await recorded(ctx)
    assert [r.scheduled_at for r in runs] == [T0, T0 + timedelta(minutes=1)]
    assert handed(ctx) == []
    assert cursor is not None and cursor[0].last == T0 + timedelta(minutes=1)


async def test_two_replicas_firing_the_same_job_at_once_record_each_occurrence_once() -> None:
    # Given two trigger replicas that both believe they own the job (a shard handed over mid-pass)
    ctx = twin_context("trigger")
    record = JobRecord(spec=EVERY_MINUTE, created_at=T0, updated_at=T0)
    now = T0 + timedelta(seconds=1)

    # When both fire it at the same instant
    outcomes = await asyncio.gather(Firer(ctx, random.Random(1)).fire(record, None, now),
                                    Firer(ctx, random.Random(2)).fire(record, None, now), return_exceptions=True)

    # Then the occurrence is one run (one record, the hand-off); the second replica's cursor write lost the race
    runs = await recorded(ctx)
    assert [r.scheduled_at for r in runs] == [T0]
    assert handed(ctx) == []
    lost = [o for o in outcomes if isinstance(o, BaseException)]
    assert [str(o) for o in lost] == [f"create jc_cursors/{EVERY_MINUTE.key}: written by someone else first"]

"""The trigger service: keep a warm index of every job, hold a fair share of shards, fire what is due."""

from __future__ import annotations

import asyncio
import contextlib
import random
import secrets
from collections import deque
from datetime import timedelta

from jetcron.bus.cluster import shard_layout
from jetcron.core.errors import JetcronError, WriteConflict
from jetcron.core.models import ShardLayout
from jetcron.core.timing.fire_marks import mark_shard
from jetcron.wire.subjects import BUCKET_CLUSTER
from jetcron_services.runtime import Context, background
from jetcron_services.trigger.calendars import CalendarView
from jetcron_services.trigger.firing import Firer
from jetcron_services.trigger.marks import MarkKeeper
from jetcron_services.trigger.ports import TriggerPorts
from jetcron_services.trigger.shards import ShardOwner
from jetcron_services.trigger.wakes import Wakes
from jetcron_services.trigger.warm import Warm

FIRES_IN_FLIGHT = 1024
"""Jobs planned and recorded concurrently: enough to keep the server's pipeline full during a herd."""
MARK_SECONDS = 0.5
"""How often a shard's holder moves its fire mark on (jetcron.core.timing.fire_marks): a write per busy shard this
often, and at most this much of a shard's fired `now` jobs that a new holder plans again (their gate refuses them)."""


class Trigger:
    """One trigger replica: watches jobs, cursors and calendars into its warm state, holds its share of the shards
    (their fire marks kept by `marks`, their jobs' wakes set by `wakes`) and fires what comes due."""

    def __init__(self, ctx: TriggerPorts, replica: str) -> None:
        self.ctx = ctx
        self.replica = replica
        self.warm = Warm(ctx.settings.trigger_shards)
        self.index, self.jobs, self.cursors = self.warm.index, self.warm.jobs, self.warm.cursors
        self.owner = ShardOwner(ctx.leases, replica, ctx.settings.trigger_shards, ctx.settings.trigger_lease_ttl)
        self.wakes = Wakes(self.warm, self.owner, ctx.settings)
        self.herds = self.wakes.herds
        self.marks = MarkKeeper(ctx, self.warm, self.owner, self.herds)
        self.calendars = CalendarView()
        self.firer = Firer(ctx, random.Random(), self.calendars)
        self.wake = asyncio.Event()
        self.synced = asyncio.Event()
        self.cursors_synced = asyncio.Event()  # planning without the cursors would re-walk recorded occurrences
        self.calendars_synced = asyncio.Event()  # nor without the calendars: their jobs' occurrences would skip
        self.firing = 0
        """Tasks firing now, at most FIRES_IN_FLIGHT; each takes what waits in `pending` when its job is done."""
        self.pending: deque[str] = deque()
        self.in_flight: set[str] = set()
        """Jobs firing or pending: one job is never planned twice at once."""
        self.again: set[str] = set()

    async def watch_jobs(self) -> None:
        await self.cursors_synced.wait()  # the shards' fire marks first: a `now` job they cover is not held at all
        async for name, record, revision in self.ctx.jobs.watch():
            if not name:
                self.synced.set()
                continue
            self.warm.job_changed(name, record, self.ctx.clock.now(), revision)
            if name not in self.jobs:
                self.herds.leave(name)
            self.wakes.park(name)
            self.wake.set()

    async def watch_cursors(self) -> None:
        async for name, cursor, revision in self.ctx.cursors.watch():
            if not name:
                self.cursors_synced.set()
            elif cursor is not None:
                if (shard := mark_shard(name)) is not None:
                    self.marks.noted(shard, cursor.fired_through)
                else:
                    self.warm.cursor_changed(name, cursor, revision)
                    self.wakes.park(name)

    async def keep_marks(self) -> None:
        while not self.ctx.stop.is_set():
            await _sleep_or(self.ctx.stop, MARK_SECONDS)
            await self.marks.write()

    async def watch_calendars(self) -> None:
        """Every calendar, compiled as it changes: applied from the next occurrence each job plans."""
        async for key, record, _ in self.ctx.calendars.watch():
            if not key:
                self.calendars_synced.set()
            else:
                self.calendars.changed(key, record)

    async def keep_shards(self) -> None:
        while not self.ctx.stop.is_set():
            try:
                if await self.owner.balance():
                    self.wake.set()
            except JetcronError as exc:
                self.ctx.log.warning("shard balance failed", error=str(exc))
            await _sleep_or(self.ctx.stop, self.ctx.settings.trigger_lease_ttl / 3)
        await self.marks.write()  # what fired since the last round: the next holders need not plan it again
        await self.owner.release_all()

    async def _fire(self, name: str) -> None:
        """Fire `name`, then the jobs that came due while every place was taken, in the order they came.

        The waiting jobs are names in a queue, not a task each blocked on a semaphore: a herd of 100,000 would
        otherwise hold as many tasks, and their wake-ups cost a tenth of the trigger's CPU."""
        try:
            while True:
                await self._fire_one(name)
                if not self.pending:
                    return
                name = self.pending.popleft()
        finally:
            self.firing -= 1

    async def _fire_one(self, name: str) -> None:
        try:
            await self._plan_and_record(name)
        except Exception:  # a bug must not stop this job (or, through the loop, every job) from firing
            self.ctx.log.exception("fire crashed; will retry", job=name)
            self.index.set(name, self.ctx.clock.now() + timedelta(seconds=1))
        finally:
            self.in_flight.discard(name)
            if name in self.again:  # its record changed while it fired: plan again with the new one
                self.again.discard(name)
                self.index.set(name, self.ctx.clock.now())
                self.wake.set()

    async def _plan_and_record(self, name: str) -> None:
        extra = self.herds.leave(name)
        for attempt in range(2):
            record = self.jobs.get(name)
            if record is None:
                return
            now = self.ctx.clock.now()  # not the loop's: a herd's tail may have waited for the gate
            revision = self.warm.revisions.get(name)
            try:
                plan, cursor = await self.firer.fire(record, self.cursors.get(name), now, extra, revision=revision)
            except JetcronError as exc:
                # Nothing past the failure was recorded and the cursor did not move: re-read it and plan again;
                # what was recorded meanwhile fails the gate harmlessly. A lost cursor race (another replica
                # moved it: a shard changing hands) is retried at once, anything else shortly.
                await self._reload_cursor(name)
                if isinstance(exc, WriteConflict) and attempt == 0:
                    continue
                self.ctx.log.warning("fire failed; will retry", job=name, error=str(exc))
                self.index.set(name, now + timedelta(seconds=1))
                return
            if cursor is not None:
                self.cursors[name] = cursor
            if plan.done and record.fired_by_mark and revision is not None:
                self.warm.fired(name, revision)
            if not plan.done and plan.next_wake is not None:
                self.wakes.queue(name, plan.next_wake)
            return

    async def _reload_cursor(self, name: str) -> None:
        self.cursors.pop(name, None)
        with contextlib.suppress(JetcronError):
            found = await self.ctx.cursors.maybe(name)
            if found is not None:
                self.cursors[name] = found

    async def fire_loop(self) -> None:
        """Fire due jobs, up to FIRES_IN_FLIGHT at once, and go on: jobs that come due while a herd is being
        recorded join its queue rather than wait for the loop. One job is never planned twice at once (its
        occurrences stay in order)."""
        await self.synced.wait()
        await self.cursors_synced.wait()
        await self.calendars_synced.wait()
        tasks: set[asyncio.Task[None]] = set()
        while not self.ctx.stop.is_set():
            self.wake.clear()
            now = self.ctx.clock.now()
            shards = self.owner.shard_ids
            for shard in shards:
                for name in self.index.pop_due(shard, now):
                    if name in self.in_flight:
                        self.again.add(name)
                        continue
                    self.in_flight.add(name)
                    if self.firing >= FIRES_IN_FLIGHT:
                        self.pending.append(name)
                        continue
                    self.firing += 1
                    task = asyncio.create_task(self._fire(name))
                    tasks.add(task)
                    task.add_done_callback(tasks.discard)
            # Each shard's due jobs are on their way: the pass is our action on them (the takeover gap).
            self.owner.acted(now)
            nxt = self.index.next_wake(shards)
            delay = 1.0 if nxt is None else max(0.0, min(1.0, (nxt - self.ctx.clock.now()).total_seconds()))
            await _sleep_or(self.wake, delay)
        for task in list(tasks):
            task.cancel()


async def _sleep_or(event: asyncio.Event, seconds: float) -> None:
    try:
        await asyncio.wait_for(event.wait(), timeout=seconds)
    except TimeoutError:
        pass


async def main(ctx: Context) -> None:
    replica = ctx.settings.agent_id or f"trigger-{secrets.token_hex(4)}"
    cluster = await ctx.buckets.open(BUCKET_CLUSTER, ShardLayout)
    await shard_layout(cluster, wanted=ctx.settings.trigger_shards, by=replica, now=ctx.clock.now())
    trigger = Trigger(ctx, replica)
    tasks = [background(ctx, c) for c in (trigger.watch_jobs(), trigger.watch_cursors(), trigger.keep_shards(),
                                              trigger.fire_loop(), trigger.watch_calendars(), trigger.keep_marks())]
    ctx.ready.set()
    ctx.log.info("trigger ready", replica=trigger.replica, shards=ctx.settings.trigger_shards)
    await ctx.stop.wait()
    for task in tasks[:2] + tasks[3:]:
        task.cancel()
    await asyncio.gather(tasks[2], return_exceptions=True)

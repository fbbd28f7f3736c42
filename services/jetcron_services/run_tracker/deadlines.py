"""Deadlines the tracker leader watches: live runs past their start or finish deadline, and occurrences of a
job with a start deadline that were never fired (the trigger down or behind). Each miss is written into the
occurrence's record once (a compare-and-set, or the create of a skipped record), so a new leader after a
failover repeats nothing; the notifier tells the owner from the record (docs/notifications.md)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Mapping
from datetime import datetime, timedelta

import msgspec

from jetcron.core.errors import JetcronError, WriteConflict
from jetcron.core.ids import run_id
from jetcron.core.lifecycle.notify import NEVER_FIRED, START, missed_deadlines, with_missed
from jetcron.core.lifecycle.retention import stream_ttl
from jetcron.core.lifecycle.runs import new_run
from jetcron.core.models import JobRecord, JobSpec, JobStatus, Run, RunState, ScheduleKind
from jetcron.core.timing import cron
from jetcron.telemetry import metrics
from jetcron.wire import subjects as s
from jetcron.wire.codec import encode
from jetcron_services.run_tracker.ports import AnnounceMissedPorts, DeadlinesPorts

SWEEP_EVERY = 0.5
LOOKBACK = timedelta(minutes=15)
"""How far back a leader that has just taken over looks for occurrences never fired: a leaderless gap longer
than this (every tracker down) leaves older ones unrecorded."""
MAX_PER_PASS = 100
"""Occurrences examined per job and pass: an every-second job after a long gap is caught up over passes."""


class Deadlines:
    def __init__(self, ctx: DeadlinesPorts, active: Mapping[str, Run], jobs: Mapping[str, JobRecord]) -> None:
        self.ctx = ctx
        self.active = active
        self.jobs = jobs
        self.checked: dict[str, datetime] = {}
        """Per job: nominal times up to here are examined (this leadership only)."""
        self.last = 0.0

    def lost_lead(self) -> None:
        self.checked.clear()

    async def maybe_sweep(self, now: datetime) -> None:
        if time.monotonic() - self.last < SWEEP_EVERY:
            return
        self.last = time.monotonic()
        # Only the runs of jobs with a deadline are looked at: a herd of 100,000 active runs costs nothing when no
        # job has one. A failed write is tried again next pass (a miss not yet recorded is still a miss then).
        watched = {key for key, record in self.jobs.items()
                   if record.spec.start_deadline_seconds is not None or record.spec.finish_deadline_seconds is not None}
        if not watched:
            return
        for run in [r for r in self.active.values() if r.job in watched]:
            if run.spec is not None and missed_deadlines(run, run.spec, now):
                try:
                    await self._mark(run.run_id, run.spec, now)
                except JetcronError as exc:
                    self.ctx.log.warning("deadline check failed", run_id=run.run_id, error=str(exc))
        for key in watched:
            record = self.jobs.get(key)
            if record is None:
                continue
            try:
                await self._occurrences(key, record, now)
            except JetcronError as exc:
                self.ctx.log.warning("deadline check failed", job=key, error=str(exc))

    async def _occurrences(self, key: str, record: JobRecord, now: datetime) -> None:
        spec = record.spec
        deadline = spec.start_deadline_seconds
        if deadline is None or record.status is not JobStatus.ACTIVE or spec.schedule.kind is ScheduleKind.NOW:
            return
        until = now - timedelta(seconds=deadline)
        # Occurrences before the job existed, before it was last resumed, or under a schedule it no longer has are
        # none of this check's business.
        since = max(record.created_at, record.updated_at, record.resumed_at or record.created_at, now - LOOKBACK)
        since = max(since, self.checked.get(key, since))
        seen = 0
        for occ in cron.occurrences(spec.schedule, since, created_at=record.created_at):
            if occ.at > until or seen >= MAX_PER_PASS:
                break
            seen += 1
            since = occ.at
            if occ.skipped is None:
                await self._occurrence(run_id(spec.key, occ.at), occ.at, spec, now)
        self.checked[key] = since if seen >= MAX_PER_PASS else max(since, until)

    async def _occurrence(self, rid: str, nominal: datetime, spec: JobSpec, now: datetime) -> None:
        if rid in self.active:
            return  # live: the first loop judges it
        found = await self.ctx.runs.maybe(rid)
        if found is not None:
            if missed_deadlines(found[0], spec, now):
                await self._mark(rid, spec, now)
            return
        run = new_run(spec, run_id=rid, state=RunState.SKIPPED, scheduled_at=nominal, due_at=nominal, now=now,
                      reason=NEVER_FIRED, flow_id=rid, keep_seconds=await self.ctx.history.keep_for(spec))
        try:
            await self.ctx.runs.create(rid, msgspec.structs.replace(run, missed=[START]))
        except WriteConflict:
            # The trigger recorded it after all (late, but before us): judge what it recorded.
            found = await self.ctx.runs.maybe(rid)
            if found is not None and missed_deadlines(found[0], spec, now):
                await self._mark(rid, spec, now)
            return
        await announce_missed(self.ctx, run, [START])
        self.ctx.log.info("start deadline missed: occurrence never fired", run_id=rid)

    async def _mark(self, rid: str, spec: JobSpec, now: datetime) -> None:
        def decide(run: Run) -> Run | None:
            new = with_missed(run, spec, now)
            return None if new is run else new

        done = await self.ctx.runs.change(rid, decide)
        if done is not None:
            old, new, _ = done
            await announce_missed(self.ctx, new, new.missed[len(old.missed):])
            self.ctx.log.info("deadline missed", run_id=rid, deadlines=new.missed[len(old.missed):])


async def announce_missed(ctx: AnnounceMissedPorts, run: Run, deadlines: list[str]) -> None:
    """Count each newly recorded miss and put it on the events stream (the audit trail, like `blocked`); the
    record already holds it, so the notifier needs neither, and a lost publish loses no notice."""
    for deadline in deadlines:
        metrics.child(metrics.DEADLINES_MISSED, deadline=deadline).inc()
        with contextlib.suppress(JetcronError):
            await ctx.publisher.publish(s.event_subject("missed", s.TRACKER_SOURCE), encode(run),
                                        msg_id=s.msg_id(run.run_id, 0, f"missed-{deadline}"),
                                        ttl=stream_ttl(run.keep_seconds, ctx.settings.history))

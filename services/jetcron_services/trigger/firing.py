"""Carry out one job's FirePlan: record each occurrence (the KV-create fire gate; a `scheduled` record is its
hand-off to placement), then the cursor."""

from __future__ import annotations

import random
from datetime import datetime, timedelta

import msgspec
import structlog
from opentelemetry import context

from jetcron import faults
from jetcron.core.errors import NotFound, WriteConflict
from jetcron.core.ids import run_id
from jetcron.core.lifecycle import dag
from jetcron.core.lifecycle.retention import one_shot
from jetcron.core.lifecycle.runs import new_run
from jetcron.core.models import JobRecord, JobSpec, OverlapPolicy, RunState, ScheduleKind
from jetcron.core.timing import exclusions, triggers
from jetcron.core.timing.triggers import FirePlan, OverlapAction, PlannedFire
from jetcron.ops.control import cancel_run
from jetcron.ops.joins import Joins, upstream_wait
from jetcron.telemetry import metrics
from jetcron.telemetry.tracing import context_from_trace_id, current_trace_id, link_to, messaging_span, tracer
from jetcron.wire import subjects as s
from jetcron.wire.messages import Cursor
from jetcron_services.trigger.calendars import CalendarView
from jetcron_services.trigger.ports import FirerPorts

log = structlog.get_logger("jetcron.trigger")
# How long after an occurrence's time a replica that meets its fire gate still supersedes the run before it, in
# case the replica that recorded it died first; past that, the one that recorded it has done so.
SUPERSEDE_WITHIN = timedelta(seconds=60)
_tracer = tracer("trigger")


class Firer:
    def __init__(self, ctx: FirerPorts, rng: random.Random, calendars: CalendarView | None = None) -> None:
        self.ctx = ctx
        self.rng = rng
        self.calendars = calendars or CalendarView()
        self.joins = Joins(ctx.runs, ctx.buckets, ctx.log)

    async def fire(self, record: JobRecord, cursor: tuple[Cursor, int] | None, now: datetime,
                   extra: float = 0.0, revision: int | None = None) -> tuple[FirePlan, tuple[Cursor, int] | None]:
        """Plan and record everything due for one job; the cursor moves only past what was recorded.

        `extra`: seconds of lead beyond the horizon this job was given as part of a herd (jetcron.core.timing.herds);
        `revision`: the job's, as its watch delivered `record` (a one-shot job's end is written against it)."""
        spec = record.spec
        horizon = triggers.staging_horizon(spec, self.ctx.settings.trigger_horizon)
        horizon += extra if horizon > 0 else 0.0
        plan = triggers.plan_fires(spec, created_at=record.created_at, cursor=cursor[0].last if cursor else None,
                                   now=now, horizon_seconds=horizon, rng=self.rng, paused_at=record.paused_at,
                                   resumed_at=record.resumed_at, calendars=self.calendars.for_job(spec))
        last_run = cursor[0].last_run if cursor else ""
        keep = await self.ctx.history.keep_for(spec)
        for fire in plan.fires:
            last_run = await self._record(record, fire, now, last_run, keep)
        if plan.fires:
            faults.point("trigger.after_publish")  # chaos: runs recorded (handed to placement), cursor not moved
        # A one-shot job that has fired needs no cursor: its record ends instead (`_end`), no later than its run's.
        one_shot_done = plan.done and one_shot(spec)
        if one_shot_done and plan.fires and not record.fired_by_mark:  # that one's end was made with it
            await self._end(record, revision, now, keep)
        if plan.cursor is not None and not one_shot_done and (cursor is None or plan.cursor != cursor[0].last):
            new = Cursor(job=spec.key, last=plan.cursor, version=record.version, last_run=last_run)
            if cursor is None:
                written = await self.ctx.cursors.create(spec.key, new)
            else:
                written = await self.ctx.cursors.update(spec.key, new, cursor[1])
            cursor = (new, written)
        return plan, cursor

    async def _end(self, record: JobRecord, revision: int | None, now: datetime, keep: float) -> None:
        """A fired one-shot job goes `keep` after its occurrence was recorded, so no later than its run's record
        (jetcron.core.lifecycle.retention.job_ttl): the trigger drops it at once (warm.Warm.fireable), every watcher
        when the server removes it. Set after the run was recorded, so that a crash in between leaves the job to fire
        again (and meet its gate), never a job gone with its occurrence unrecorded."""
        ends = now + timedelta(seconds=keep)

        def decide(current: JobRecord) -> JobRecord | None:
            if current.expires_at is not None or not one_shot(current.spec):
                return None  # ended already, or changed meanwhile into a job that fires again
            return msgspec.structs.replace(current, expires_at=ends)

        copy = (record, revision) if revision else None  # the record the watch delivered: saves a read
        try:
            await self.ctx.jobs.change(record.spec.key, decide, copy=copy)
        except NotFound:
            pass  # removed meanwhile

    async def _join(self, spec: JobSpec, rid: str, now: datetime) -> tuple[RunState, str, datetime | None]:
        """An occurrence of a job joined on its upstreams' latest successes: ready (scheduled) or waiting for them.
        At most one of the job's runs waits: while one does, a later occurrence is recorded skipped and the waiting
        one is released in its place once the upstreams allow, so that no two runs take the same successes."""
        waiting = await self.joins.waiting_run(spec.key)
        pending, newest = await self.joins.readiness(spec)
        if waiting is None:
            if pending:
                return RunState.WAITING, upstream_wait(pending), None
            return RunState.SCHEDULED, "", dag.took_at(now, newest)
        if not pending:
            await self.joins.release(waiting.run_id, dag.took_at(now, newest))
        return RunState.SKIPPED, f"join: {waiting.run_id} still waited on its upstream jobs and runs in its place", None

    async def _overlap(self, record: JobRecord, last_run: str) -> tuple[OverlapAction, str]:
        if record.spec.overlap is OverlapPolicy.ALLOW or not last_run:
            return OverlapAction.START, ""
        try:
            previous, _ = await self.ctx.runs.get(last_run)
        except NotFound:
            return OverlapAction.START, ""
        active = 0 if previous.state.terminal else 1
        buffered = 1 if previous.state is RunState.WAITING else 0
        return triggers.decide_overlap(record.spec.overlap, active, buffered), previous.run_id

    async def _supersede(self, previous: str, rid: str, now: datetime) -> None:
        """cancel_previous: cancel the run before `rid` only once `rid` is recorded, so the ledger never shows
        the job with its last run cancelled and no successor (and a crash in between cannot leave it so)."""
        if previous:
            await cancel_run(self.ctx.runs, self.ctx.leases, self.ctx.rpc, previous,
                             f"overlap: superseded by {rid}", now, self.ctx.settings.run_lease_ttl)

    async def _record(self, record: JobRecord, fire: PlannedFire, now: datetime, last_run: str, keep: float) -> str:
        spec = record.spec
        rid = run_id(spec.key, fire.nominal)
        # A one-off run continues the trace of the request that created the job; each occurrence of a recurring
        # job starts its own trace, linked to that request.
        one_off = spec.schedule.kind in (ScheduleKind.NOW, ScheduleKind.AT)
        parent = context_from_trace_id(record.trace_id) if one_off else context.Context()
        with messaging_span(_tracer, "publish", s.place_subject(spec.priority), parent=parent, run_id=rid,
                            job=spec.key, links=[] if one_off else link_to(record.trace_id)):
            state, reason, after, supersede, took = RunState.SCHEDULED, "", "", "", None
            if fire.skip_reason is not None:
                state, reason = RunState.SKIPPED, fire.skip_reason
            else:
                action, previous = await self._overlap(record, last_run)
                if action is OverlapAction.SKIP:
                    state, reason = RunState.SKIPPED, f"overlap: {previous} still active (policy {spec.overlap})"
                elif action is OverlapAction.BUFFER:
                    state, reason, after = RunState.WAITING, f"overlap: waiting for {previous}", previous
                elif action is OverlapAction.CANCEL_PREVIOUS:
                    supersede = previous
                if state is RunState.SCHEDULED and spec.depends_on:  # join: latest (warm.Warm.fireable)
                    state, reason, took = await self._join(spec, rid, now)
            run = new_run(spec, run_id=rid, state=state, scheduled_at=fire.nominal, due_at=fire.due_at, now=now,
                          reason=reason, after=after, flow_id=rid, trace_id=current_trace_id(),
                          keep_seconds=keep, released_at=took)
            try:
                await self.ctx.runs.create(rid, run)
            except WriteConflict:
                # The fire gate: another replica (or our earlier life) already recorded this occurrence.
                metrics.FIRE_GATE_DUPLICATES.inc()
                if state is RunState.SCHEDULED and now - fire.nominal < SUPERSEDE_WITHIN:
                    await self._supersede(supersede, rid, now)  # our earlier life may have died before it
                return rid if state is not RunState.SKIPPED else last_run
            metrics.child(metrics.OCCURRENCES, result=state.value).inc()
            if spec.depends_on:
                await self.joins.recorded(run)  # ready or waiting on its upstreams: what its next occurrence reads
            kind = exclusions.skip_kind(fire.skip_reason)
            if kind is not None:
                metrics.child(metrics.SKIPPED_BY_CALENDAR, kind=kind).inc()
            metrics.FIRE_LATENESS.observe(max(0.0, (now - fire.nominal).total_seconds()))
            if state is RunState.SCHEDULED:
                await self._supersede(supersede, rid, now)
            return rid if state is not RunState.SKIPPED else last_run

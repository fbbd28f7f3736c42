"""DAG release: when a run ends, start the downstream jobs it allows. Joined on the same occurrence, a downstream
runs once its upstreams' runs of one flow all succeeded (blocked when one failed for good); joined on the latest,
once each upstream has succeeded since it last ran (jetcron.core.lifecycle.dag.join_of, libs/jetcron/ops/joins.py),
whose marks every replica repairs from its runs watch (`seen`, jetcron_services.run_tracker.join_mark_upkeep). A run
that waits longer than its job's wait timeout (jetcron.core.lifecycle.dag.wait_timeout: its own, else the default) is
blocked. The jobs it consults are jetcron_services.run_tracker.flow_jobs."""

from __future__ import annotations

import time
from collections.abc import Mapping
from datetime import datetime

import msgspec

from jetcron.core.errors import JetcronError, NotFound, WriteConflict
from jetcron.core.ids import run_id, stamp_of
from jetcron.core.lifecycle.dag import join_of, took_at, wait_timeout
from jetcron.core.lifecycle.retention import stream_ttl
from jetcron.core.lifecycle.run_state import RunEvent
from jetcron.core.lifecycle.runs import Change, apply, new_run
from jetcron.core.models import JobRecord, JoinPolicy, Run, RunState, ScheduleKind
from jetcron.ops import joins
from jetcron.telemetry import metrics
from jetcron.wire import subjects as s
from jetcron.wire.codec import encode
from jetcron_services.run_tracker.flow_jobs import FlowJobs
from jetcron_services.run_tracker.join_mark_upkeep import JoinMarkUpkeep
from jetcron_services.run_tracker.ports import FlowsPorts

WAIT_SWEEP_EVERY = 1.0
"""Seconds between the leader's looks for runs waiting past their job's wait timeout."""


def flow_stamp(run: Run) -> str:
    """Every run of one flow shares the root occurrence's stamp: <job key>.<stamp> names each job's run."""
    return stamp_of(run.flow_id or run.run_id)


class Flows:
    def __init__(self, ctx: FlowsPorts) -> None:
        self.ctx = ctx
        self.joins = joins.Joins(ctx.runs, ctx.buckets, ctx.log)
        self.index = FlowJobs()
        # The index's parts by their own names: the deadlines read `jobs`.
        self.jobs = self.index.jobs
        self.downstream = self.index.downstream
        self.latest_downstream = self.index.latest_downstream
        self.marks = JoinMarkUpkeep(ctx, self.joins, self.index)
        self._repairs = self.marks.repairs  # the marks queued and not yet raised (empty: the repairs are done)
        self._expired_at = 0.0

    async def watch_jobs(self) -> None:
        async for name, record, _ in self.ctx.jobs.watch():
            if not name:
                if not self.index.synced.is_set():
                    self.index.synced.set()
                    self.marks.judge_early()
                continue
            old = self.index.on_record(name, record)
            if self.index.synced.is_set():
                await self.marks.forget_left(name, old, self.jobs.get(name), record)

    def seen(self, run: Run) -> None:
        """A run record from the runs watch: the join marks it gives are raised where this replica has not seen
        them raised (JoinMarkUpkeep.seen)."""
        self.marks.seen(run)

    async def repair(self) -> None:
        """Raise the marks `seen` queued, for ever."""
        await self.marks.repair()

    async def on_terminal(self, run: Run) -> None:
        if run.state is RunState.SUCCEEDED and self.latest_downstream.get(run.job):
            await self.joins.recorded(run, upstream=True)  # before its dependents read it below
        for name in sorted(self.downstream.get(run.job, ())):
            record = self.jobs.get(name)
            if record is None:
                continue
            if join_of(record.spec) is JoinPolicy.SAME_OCCURRENCE:
                await self._consider(record, run)
            elif run.state is RunState.SUCCEEDED:  # a failure leaves a latest join waiting for the next success
                await self._consider_latest(record, run)

    async def _consider_latest(self, record: JobRecord, ended: Run) -> None:
        """An upstream succeeded: release the job's waiting run if every upstream now has; a job without a schedule
        of its own gets a run here (waiting, or ready: named after the newest of the successes it takes, so two
        trackers releasing it at once name the same run)."""
        spec, now = record.spec, self.ctx.clock.now()
        waiting = await self.joins.waiting_run(spec.key)
        if waiting is not None:
            pending, newest = await self.joins.readiness(spec)
            if not pending:
                await self.joins.release(waiting.run_id, took_at(now, newest))
            else:
                await self._move_waiting(waiting.run_id, RunState.WAITING, joins.upstream_wait(pending))
            return
        if spec.schedule.kind is not ScheduleKind.NOW:
            return  # it fires on its own schedule (the trigger records it ready or waiting)
        pending, newest = await self.joins.readiness(spec)
        named = newest if not pending and newest is not None else (ended.finished_at or now)
        rid = run_id(spec.key, named)
        state, reason = (RunState.WAITING, joins.upstream_wait(pending)) if pending else (RunState.SCHEDULED, "")
        run = new_run(spec, run_id=rid, state=state, scheduled_at=named, due_at=now, now=now, reason=reason,
                      flow_id=rid, trace_id=ended.trace_id, keep_seconds=await self.ctx.history.keep_for(spec),
                      released_at=took_at(now, newest) if state is RunState.SCHEDULED else None)
        try:
            await self.ctx.runs.create(rid, run)
        except WriteConflict:
            return  # recorded already, by another tracker's release of the same successes
        await self.joins.recorded(run)

    async def maybe_expire_waits(self, active: Mapping[str, Run], now: datetime) -> None:
        if time.monotonic() - self._expired_at < WAIT_SWEEP_EVERY:
            return
        self._expired_at = time.monotonic()
        try:
            await self.expire_waits(active, now)
        except JetcronError as exc:
            self.ctx.log.warning("wait timeouts not applied; next pass", error=str(exc))

    async def expire_waits(self, active: Mapping[str, Run], now: datetime) -> int:
        """Block every run that has waited on its upstreams longer than its job's wait timeout (leader); how many.
        Only jobs with a timeout (every job with upstreams: its own, else the default) are looked at, so a herd of
        active runs costs nothing otherwise."""
        timed = {key for key, record in self.jobs.items() if wait_timeout(record.spec) is not None}
        if not timed:
            return 0
        blocked = 0
        for run in [r for r in active.values() if r.job in timed and r.state is RunState.WAITING and not r.after]:
            record = self.jobs.get(run.job)
            timeout = wait_timeout(record.spec) if record is not None else None
            if record is None or timeout is None or (now - run.created_at).total_seconds() < timeout:
                continue
            default = "" if record.spec.wait_timeout_seconds is not None else " (the default wait_timeout_seconds)"
            reason = (f"wait timeout: upstream jobs did not allow it within {timeout:g} s{default} "
                      f"({run.reason or 'waiting'})")
            await self._move_waiting(run.run_id, RunState.BLOCKED, reason)
            blocked += 1
        return blocked

    async def _consider(self, record: JobRecord, ended: Run) -> None:
        stamp = flow_stamp(ended)
        run_id = f"{record.spec.key}.{stamp}"
        if ended.state is not RunState.SUCCEEDED:
            await self._create(record, ended, run_id, RunState.BLOCKED,
                               f"upstream {ended.job} run {ended.run_id} ended {ended.state}")
            return
        pending: list[str] = []
        for up in record.spec.upstream_keys():
            found = await self.ctx.runs.maybe(f"{up}.{stamp}")
            if found is None or found[0].state is not RunState.SUCCEEDED:
                pending.append(up if found is None else f"{up} ({found[0].state})")
        if pending:
            # Recorded now, so `runs list` shows what it waits for; the last upstream's ending releases it.
            await self._create(record, ended, run_id, RunState.WAITING,
                               f"waiting on upstream jobs: {', '.join(pending)}")
            return
        await self._create(record, ended, run_id, RunState.SCHEDULED, "")

    async def _create(self, record: JobRecord, ended: Run, run_id: str, state: RunState, reason: str) -> None:
        now = self.ctx.clock.now()
        spec = record.spec
        run = new_run(spec, run_id=run_id, state=state, scheduled_at=ended.scheduled_at, due_at=now, now=now,
                      reason=reason, flow_id=ended.flow_id or ended.run_id, trace_id=ended.trace_id,
                      keep_seconds=await self.ctx.history.keep_for(spec))
        try:
            await self.ctx.runs.create(run_id, run)
        except WriteConflict:
            # Created by the other upstream's ending, or by an earlier try of ours: move it on if it waits.
            await self._move_waiting(run_id, state, reason)
            return
        except JetcronError:
            raise
        if state in (RunState.WAITING, RunState.SCHEDULED):
            return  # a `scheduled` record is its own hand-off to placement
        await self._blocked(run)

    async def _blocked(self, run: Run) -> None:
        """A blocked run is terminal from birth: say so on the events stream, count it, and block its own
        downstream in turn."""
        await self.ctx.publisher.publish(s.event_subject("blocked", s.TRACKER_SOURCE), encode(run),
                                         msg_id=s.msg_id(run.run_id, 1, "blocked"),
                                         ttl=stream_ttl(run.keep_seconds, self.ctx.settings.history))
        metrics.child(metrics.RUNS_FINISHED, outcome=RunState.BLOCKED.value).inc()
        await self.on_terminal(run)

    async def _move_waiting(self, run_id: str, state: RunState, reason: str) -> None:
        """A downstream run recorded as waiting: release it, block it, or refresh what it waits on (CAS)."""
        event = {RunState.SCHEDULED: RunEvent.RELEASE, RunState.BLOCKED: RunEvent.BLOCK}.get(state)
        now = self.ctx.clock.now()

        def decide(run: Run) -> Run | None:
            if run.state is not RunState.WAITING:
                return None  # released, blocked or cancelled already
            if event is None:
                return msgspec.structs.replace(run, reason=reason)
            return apply(run, Change(event=event, reason=reason), now)

        try:
            changed = await self.ctx.runs.change(run_id, decide)
        except NotFound:
            return
        if changed is None:
            return
        new = changed[1]
        if new.state is RunState.BLOCKED:
            await self._blocked(new)

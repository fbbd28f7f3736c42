"""DAG release: when a run ends, start the downstream jobs it allows. Joined on the same occurrence, a downstream
runs once its upstreams' runs of one flow all succeeded (blocked when one failed for good); joined on the latest,
once each upstream has succeeded since it last ran (jetcron.core.lifecycle.dag.join_of, libs/jetcron/ops/joins.py),
whose marks every replica repairs from its runs watch (`seen`). A run that waits longer than its job's wait timeout
(jetcron.core.lifecycle.dag.wait_timeout: its own, else the default) is blocked."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from datetime import datetime

import msgspec

from jetcron.core.errors import JetcronError, NotFound, WriteConflict
from jetcron.core.ids import run_id, stamp_of
from jetcron.core.lifecycle.dag import join_of, took_at, wait_timeout
from jetcron.core.lifecycle.join_marks import JoinMark, Mark, mark_key, marks_of, raised
from jetcron.core.lifecycle.retention import stream_ttl
from jetcron.core.lifecycle.run_state import RunEvent
from jetcron.core.lifecycle.runs import Change, apply, new_run
from jetcron.core.models import JobRecord, JobSpec, JobStatus, JoinPolicy, Run, RunState, ScheduleKind
from jetcron.ops import joins
from jetcron.telemetry import metrics
from jetcron.wire import subjects as s
from jetcron.wire.codec import encode
from jetcron_services.runtime import Context

WAIT_SWEEP_EVERY = 1.0
"""Seconds between the leader's looks for runs waiting past their job's wait timeout."""
REPAIR_RETRY = 1.0
"""Seconds before marks that could not be raised are tried again."""
EARLY_AT_MOST = 10_000
"""Marks kept from the records the runs watch delivers before the jobs watch has caught up (`Flows.seen`). Past
it, the marks of every job in a flow are read again from its newest records once it has (a bounded read each),
rather than holding one entry per job of a cluster whose runs came in first."""


def flow_stamp(run: Run) -> str:
    """Every run of one flow shares the root occurrence's stamp: <job key>.<stamp> names each job's run."""
    return stamp_of(run.flow_id or run.run_id)


def consulted(spec: JobSpec) -> bool:
    """Whether the tracker ever looks a job up: a downstream job (its upstreams' ends release it), or one with a
    deadline (Deadlines) or a wait timeout. It holds no other job: most are not (a day's `now` jobs, kept days)."""
    return bool(spec.depends_on) or spec.wait_timeout_seconds is not None \
        or spec.start_deadline_seconds is not None or spec.finish_deadline_seconds is not None


def _latest(record: JobRecord | None) -> bool:
    return record is not None and bool(record.spec.depends_on) and join_of(record.spec) is JoinPolicy.LATEST


class Flows:
    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.joins = joins.Joins(ctx.runs, ctx.buckets, ctx.log)
        self.jobs: dict[str, JobRecord] = {}
        """The active jobs the tracker consults (consulted()), by key."""
        self.downstream: dict[str, set[str]] = {}
        self.latest_downstream: dict[str, set[str]] = {}
        """Upstream job key -> its active dependents joined on the latest: the jobs whose successes are marked."""
        self._expired_at = 0.0
        self.jobs_synced = asyncio.Event()
        self._repairs: dict[str, tuple[Mark, str, JoinMark | None]] = {}
        """Marks to raise from the records the runs watch delivered, by mark key (the highest seen; None: read it
        again from the job's newest records)."""
        self._early: dict[str, tuple[Mark, str, JoinMark | None]] = {}
        """Marks from records delivered before the jobs watch said which jobs are in flows (see `seen`)."""
        self._early_overflowed = False
        self._wake = asyncio.Event()

    async def watch_jobs(self) -> None:
        async for name, record, _ in self.ctx.jobs.watch():
            if not name:
                if not self.jobs_synced.is_set():
                    self.jobs_synced.set()
                    self._judge_early()
                continue
            old = self.jobs.pop(name, None)
            if old is not None:
                for up in old.spec.upstream_keys():
                    self.downstream.get(up, set()).discard(name)
                    self.latest_downstream.get(up, set()).discard(name)
            if record is not None and record.status is JobStatus.ACTIVE and consulted(record.spec):
                self.jobs[name] = record
                for up in record.spec.upstream_keys():
                    self.downstream.setdefault(up, set()).add(name)
                    if _latest(record):
                        self.latest_downstream.setdefault(up, set()).add(name)
            if self.jobs_synced.is_set():
                await self._forget_left(name, old, self.jobs.get(name), record)

    async def _forget_left(self, name: str, old: JobRecord | None, new: JobRecord | None,
                           stored: JobRecord | None) -> None:
        """Drop the marks no one raises any more: when a job stops being an active `latest` join (paused, deleted,
        changed), its RAN, and an upstream's OK once it is left without one. Kept, they would go stale while it is out
        and be read as current if it came back; dropped, they are made again from its newest records when it does.
        A WAITING mark stays until the job is deleted: it only names a run, whose record says whether it still
        waits, and one older than a job's newest records could not be found again."""
        gone: list[tuple[Mark, str]] = []
        if _latest(old) and not _latest(new):
            gone.append((Mark.RAN, name))
        deleted = stored is None or stored.status is JobStatus.DELETED
        if deleted and (_latest(old) or _latest(stored)):  # a paused job deleted was not held: its record says
            gone.append((Mark.WAITING, name))
        if _latest(old):
            assert old is not None
            gone += [(Mark.OK, up) for up in old.spec.upstream_keys() if not self.latest_downstream.get(up)]
        for mark, job in gone:
            try:
                await self.joins.forget(mark, job)
            except JetcronError as exc:
                self.ctx.log.warning("join mark not dropped", job=job, mark=mark.value, error=str(exc))

    def seen(self, run: Run) -> None:
        """A run record from the runs watch (every replica sees each): a mark it gives that this replica has not
        seen raised is queued to be raised, so that a service that stored the record and died before raising the
        mark is made good by whichever replica sees the record. Before the jobs watch has said which jobs are in
        flows, the marks are kept (the highest of each) and judged once it has."""
        synced = self.jobs_synced.is_set()
        if synced:
            upstream, dependent = bool(self.latest_downstream.get(run.job)), _latest(self.jobs.get(run.job))
        else:  # any success may be an upstream's; a dependent's run says so in its own copy of the spec
            upstream, dependent = True, run.spec is not None and bool(run.spec.depends_on)
        if not (upstream or dependent):
            return
        for mark, value in marks_of(run, upstream=upstream, dependent=dependent):
            if raised(mark, self.joins.known.get(mark_key(mark, run.job)), value) is None:
                continue
            if synced:
                self._queue(self._repairs, mark, run.job, value)
                self._wake.set()
            elif len(self._early) < EARLY_AT_MOST or mark_key(mark, run.job) in self._early:
                self._queue(self._early, mark, run.job, value)
            else:
                self._early_overflowed = True

    @staticmethod
    def _queue(queue: dict[str, tuple[Mark, str, JoinMark | None]], mark: Mark, job: str,
               value: JoinMark | None) -> None:
        key = mark_key(mark, job)
        queued = queue.get(key)
        if queued is None or value is None or (queued[2] is not None and raised(mark, queued[2], value) is not None):
            queue[key] = (mark, job, value)

    def _judge_early(self) -> None:
        """The jobs watch has caught up: queue the early marks of the jobs in flows, drop the rest; past
        EARLY_AT_MOST, read every flow job's marks again from its records instead."""
        if self._early_overflowed:
            for up, dependents in self.latest_downstream.items():
                if dependents:
                    self._queue(self._repairs, Mark.OK, up, None)
            for job in [key for key, record in self.jobs.items() if _latest(record)]:
                self._queue(self._repairs, Mark.RAN, job, None)
                self._queue(self._repairs, Mark.WAITING, job, None)
        else:
            for mark, job, value in self._early.values():
                if bool(self.latest_downstream.get(job)) if mark is Mark.OK else _latest(self.jobs.get(job)):
                    self._queue(self._repairs, mark, job, value)
        self._early, self._early_overflowed = {}, False
        self._wake.set()

    async def repair(self) -> None:
        """Raise the marks `seen` queued (for ever; each raise is a compare-and-set, a no-op where one stands)."""
        while True:
            await self._wake.wait()
            self._wake.clear()
            while self._repairs:
                key = next(iter(self._repairs))
                mark, job, value = self._repairs.pop(key)
                try:
                    if value is None:
                        await self.joins.refresh(mark, job)
                    else:
                        await self.joins.raise_to(mark, job, value)
                except JetcronError as exc:
                    self.ctx.log.warning("join mark not repaired; trying again", job=job, mark=mark.value,
                                         error=str(exc))
                    self._repairs.setdefault(key, (mark, job, value))
                    await asyncio.sleep(REPAIR_RETRY)

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

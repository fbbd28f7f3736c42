"""The reconciler: the queue is a hint, the run record is the truth. Re-drive runs whose step stalled.

What to do with a run is decided in `jetcron.core.lifecycle.reconcile.judge`; this module keeps the index, makes the
reads a judgement asks for, and carries out what it decides.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager
from datetime import datetime, timedelta

from msgspec.structs import replace
from opentelemetry.trace import Span

from jetcron.bus.lease import Lease
from jetcron.core.errors import JetcronError
from jetcron.core.lifecycle import reconcile_steps as step
from jetcron.core.lifecycle.leases import foreign_claim
from jetcron.core.lifecycle.reconcile import (
    Timing,
    Tracked,
    judge,
    quiet_until,
    release,
    same_step,
    track,
    whole,
    with_horizon,
)
from jetcron.core.lifecycle.run_state import RunEvent
from jetcron.core.lifecycle.runs import Change
from jetcron.core.models import Run
from jetcron.core.timing.due_index import DueIndex
from jetcron.ops.dispatch import redrive
from jetcron.telemetry import metrics
from jetcron.telemetry.tracing import context_from_trace_id, tracer
from jetcron.wire import subjects as s
from jetcron_services.run_tracker.progress import Progress
from jetcron_services.run_tracker.records import Records
from jetcron_services.runtime import Context

_tracer = tracer("run_tracker")
SWEEP_CONCURRENCY = 64
REDRIVES_PER_SWEEP = 16
"""Re-drives (a PlaceRun each, an acknowledged write) one sweep may send; the rest wait a re-drive period. A run
left `scheduled` is held by placement from its record already, and a backlog behind full agents once had the
tracker re-drive tens of thousands at once, writes that took the disk from the runs it was waiting for until no
run finished (bench/longlife.py). Four sweeps a second: 64 re-drives/s at most, ~3,800 in a minute."""


class ActiveRuns(Mapping[str, Run]):
    """The watched records of the non-terminal runs by id (what the deadlines and the listing read), each in the
    index's form (`jetcron.core.lifecycle.reconcile.index_form`: a waiting run's without its spec and history)."""

    def __init__(self, tracked: dict[str, Tracked]) -> None:
        self._tracked = tracked

    def __getitem__(self, run_id: str) -> Run:
        return self._tracked[run_id].run

    def __iter__(self) -> Iterator[str]:
        return iter(self._tracked)

    def __len__(self) -> int:
        return len(self._tracked)

    def __contains__(self, run_id: object) -> bool:
        return run_id in self._tracked

    def with_queues(self) -> Iterator[tuple[Run, str]]:
        """Each record with its job's queue (which a record in the index's form no longer says)."""
        return ((tracked.run, tracked.queue) for tracked in self._tracked.values())


class Reconciler:
    """Keeps an index of non-terminal runs from the runs watch (no scans) and checks each on its own clock."""

    def __init__(self, ctx: Context, records: Records) -> None:
        self.ctx = ctx
        self.records = records
        settings = ctx.settings
        self.timing = Timing(lease_ttl=settings.run_lease_ttl, assign_stall=settings.assign_stall,
                             redrive_after=settings.redrive_after)
        self.tracked: dict[str, Tracked] = {}
        """Run id -> all the reconciler knows of it. The three indexes below say only when a sweep looks at it."""
        self.active = ActiveRuns(self.tracked)
        self.quiet = DueIndex(1)
        """Runs no sweep could act on before a time (`quiet_until`, or a live lease's `Quiet`), by that time: a
        herd staged minutes ahead is tens of thousands of assigned runs that need no look until their due time,
        and a sweep must not even walk them: a sweep comes every 0.25 s, and a walk of them all is the tracker's
        whole CPU at the design's sizes."""
        self.looked_at: set[str] = set()
        """Runs every sweep looks at (running, gangs, waiting, or past their quiet time) until their record
        changes."""
        self.awaiting: dict[str, dict[str, None]] = {}
        """Agent -> runs parked while it says reports are still to go (their `Tracked.awaiting`), in the order
        they were parked: out of the sweeps, released together once it has none left (or is gone)."""
        self._agents_seen: dict[str, Lease | None] = {}
        """Agent leases read this sweep (liveness per agent: every run bound to one is judged by it)."""
        self._redrives_left = REDRIVES_PER_SWEEP
        """Re-drives this sweep may still send."""
        self._unsequenced: set[str] = set()
        """Runs that asked for the events horizon this sweep (read once, after every look)."""
        self.progress = Progress(ctx)
        self.synced = asyncio.Event()
        self.ended: Callable[[Run, bool, bool], None] = lambda run, was_live, synced: None
        """Told of every terminal record the watch delivers: whether the index held the run as live until then, and
        whether the initial values are all in (the finished runs per minute count from it:
        jetcron_services.run_tracker.finished)."""
        self.seen: Callable[[Run], None] = lambda run: None
        """Told of every record the watch delivers (the flows' join marks are repaired from them:
        jetcron_services.run_tracker.flows.Flows.seen)."""

    async def watch(self) -> None:
        async for run_id, run, revision in self.ctx.runs.watch():
            if not run_id:
                self.synced.set()
                continue
            self.on_record(run_id, run, revision)

    def on_record(self, run_id: str, run: Run | None, revision: int) -> None:
        """A run's record changed (or was deleted): index it afresh."""
        if run is not None:
            self.seen(run)
            if run.state.terminal:
                self.ended(run, run_id in self.tracked, self.synced.is_set())
        new = track(self.tracked.get(run_id), run, revision)
        if new is None:
            self._forget(run_id)
            return
        self._store(run_id, new)
        quiet = quiet_until(new.run, self.timing)
        if quiet is None:
            self.quiet.remove(run_id)
            self.looked_at.add(run_id)
        else:
            self.looked_at.discard(run_id)
            self.quiet.set(run_id, quiet)

    def _store(self, run_id: str, new: Tracked) -> None:
        """Keep `new` and the awaiting index with it."""
        old = self.tracked.get(run_id)
        was = old.awaiting.agent if old is not None and old.awaiting is not None else None
        agent = new.awaiting.agent if new.awaiting is not None else None
        if was != agent:
            if was is not None:
                self._unpark(was, run_id)
            if agent is not None:
                self.awaiting.setdefault(agent, {})[run_id] = None
        self.tracked[run_id] = new

    def _forget(self, run_id: str) -> None:
        old = self.tracked.pop(run_id, None)
        if old is not None and old.awaiting is not None:
            self._unpark(old.awaiting.agent, run_id)
        self.quiet.remove(run_id)
        self.looked_at.discard(run_id)

    def _unpark(self, agent: str, run_id: str) -> None:
        runs = self.awaiting.get(agent)
        if runs is not None:
            runs.pop(run_id, None)
            if not runs:
                del self.awaiting[agent]

    async def _release_awaiting(self, now: datetime) -> None:
        """Runs waiting on an agent's queued reports go back to the sweep once it has none left or is gone (and
        any of them after REPORT_WAIT_CAP). Read before this sweep's events horizon: a heartbeat that said none
        were left was written after every one of them was acked, so that horizon covers them."""
        for agent in list(self.awaiting):
            done = not await self.progress.may_still_report(agent)
            for run_id in list(self.awaiting.get(agent, ())):
                released = release(self.tracked[run_id], done, now)
                if released is not None:
                    self._store(run_id, released)
                    self.quiet.remove(run_id)
                    self.looked_at.add(run_id)

    def known(self, run_id: str) -> tuple[Run, int] | None:
        """The last watched record of an active run and its revision (maybe stale: Records.change checks), if the
        index keeps it whole (a write must start from the whole record: one in the index's form is read back)."""
        tracked = self.tracked.get(run_id)
        return None if tracked is None or not whole(tracked.run) else (tracked.run, tracked.revision)

    async def read_whole(self, seen: Run) -> Run | None:
        """`seen` whole: itself, or its record read back if the index keeps it in its form; None if the record
        has moved on from `seen`'s state and attempt meanwhile (its new revision comes by the watch)."""
        if whole(seen):
            return seen
        found = await self.ctx.runs.maybe(seen.run_id)
        if found is None or not same_step(found[0], seen):
            return None
        return found[0]

    async def sweep(self, now: datetime) -> None:
        """Check every active run; those that need a read or a write proceed concurrently (many agents can
        die at once, and their runs should not queue behind each other's round trips)."""
        gate = asyncio.Semaphore(SWEEP_CONCURRENCY)
        self._agents_seen.clear()
        self._redrives_left = REDRIVES_PER_SWEEP
        await self.progress.refresh()

        async def one(run: Run) -> None:
            async with gate:
                with contextlib.suppress(JetcronError):
                    await self._check(run, now)

        await self._release_awaiting(now)
        # Only the runs that could need something now get a task: creating one per active run every sweep
        # cost the tracker most of a core with 40,000 staged runs waiting for their due time.
        self.looked_at.update(self.quiet.pop_due(0, now, limit=len(self.tracked) + 1))
        due = [self.tracked[r].run for r in self.looked_at]
        await asyncio.gather(*(one(run) for run in due))
        if self._unsequenced:
            with contextlib.suppress(JetcronError):
                horizon = await self.progress.horizon()
                for run_id in self._unsequenced:
                    if (tracked := self.tracked.get(run_id)) is not None:
                        self._store(run_id, with_horizon(tracked, horizon))
                self._unsequenced.clear()

    async def _check(self, seen: Run, now: datetime) -> None:
        """Judge `seen` (the record as this sweep found it), making each read the judgement asks for.

        Each step is judged on what is known of the run at that moment: the runs watch may have moved it on
        during a read (then what was found of its lease is forgotten, and a change decided from `seen` is not
        written: Records.change checks the state and attempt). If it ended meanwhile, the check goes on from
        nothing found, as for a run just watched, and keeps nothing.
        """
        run_id = seen.run_id
        gone: Tracked | None = None
        look: step.Look = step.Start()
        lease: Lease | None = None
        while True:
            live = self.tracked.get(run_id)
            if live is None:
                judged = gone if gone is not None else Tracked(run=seen, revision=0)
            else:
                judged = live if live.run is seen else replace(live, run=seen)
            verdict = judge(judged, look, now, self.timing)
            if isinstance(verdict.action, step.Redrive) and not self._may_redrive(run_id, now):
                return
            if live is None:
                gone = verdict.tracked
            elif verdict.tracked is not judged:
                kept = verdict.tracked if live.run is seen else replace(verdict.tracked, run=live.run,
                                                                         revision=live.revision)
                self._store(run_id, kept)
            match verdict.action:
                case step.ReadLease():
                    lease = await self.ctx.leases.read(s.run_lease_key(run_id))
                    look = step.RunLease(claim=_claim(lease), read_up_to=self.progress.read_up_to)
                case step.ReadAgentLease(agent=agent, bound=bound):
                    look = step.RunLease(claim=_claim(lease), read_up_to=self.progress.read_up_to,
                                         agent=step.AgentSeen(until=await self._agent_until(agent, bound)))
                case step.Stay():
                    return
                case step.Quiet(until=until):
                    # Only if no record has re-indexed it since this sweep began. Nothing but its record can change
                    # it before then; walked every sweep instead, a herd's 100,000 runs past their stall with live
                    # leases were most of the tracker's CPU while their reports waited for it.
                    if run_id in self.looked_at:
                        self.looked_at.discard(run_id)
                        self.quiet.set(run_id, until)
                    return
                case step.AskAgentIdle(agent=agent):
                    look = step.AgentIdle(idle=await self.progress.agent_idle_or_gone(agent))
                case step.ReadMemberLease(index=index):
                    member = await self.ctx.leases.read(s.gang_lease_key(run_id, seen.agents[index]))
                    look = step.MemberLease(index=index, claim=_claim(member))
                case step.TakeAway():
                    assert lease is not None
                    if not await self._still_foreign(lease, run_id):
                        return  # our copy of the run was behind the claim: its record comes by the watch
                    await self._take_away(lease, seen)
                    look = step.RunLease(claim=None, read_up_to=self.progress.read_up_to)
                case step.AskAgentReports(agent=agent, since=since):
                    pending = await self.progress.may_still_report(agent)
                    look = step.AgentReports(agent=agent, pending=pending, since=since,
                                             read_up_to=self.progress.read_up_to)
                case step.ReadUpstream(run_id=after):
                    look = step.Upstream(ended=await self._ended(after))
                case _:
                    await self._carry_out(seen, verdict.action)
                    return

    def _may_redrive(self, run_id: str, now: datetime) -> bool:
        """Whether this sweep may re-drive one more run; if not, the run leaves the sweeps for a re-drive period
        as it is (not counted as re-driven), and is judged again then. Only if this sweep still holds it, as for
        a Quiet verdict: a run whose record ended meanwhile is no longer tracked, and one its record re-indexed
        is timed by that record."""
        if self._redrives_left > 0:
            self._redrives_left -= 1
            return True
        if run_id in self.looked_at:
            self.looked_at.discard(run_id)
            self.quiet.set(run_id, now + self.timing.redrive_every)
        return False

    async def _agent_until(self, agent: str, bound: str) -> datetime | None:
        """Until when `agent`'s own lease holds with nonce `bound` (None: gone, or another life's). Read once per
        agent per sweep: its runs are judged together, and a dead agent's all lost in the same sweep."""
        if agent not in self._agents_seen:
            self._agents_seen[agent] = await self.ctx.leases.own(s.agent_lease_key(agent), agent)
        lease = self._agents_seen[agent]
        if lease is None or lease.value.nonce != bound or lease.written_at is None:
            return None
        return lease.written_at + timedelta(seconds=lease.ttl or self.timing.lease_ttl)

    async def _ended(self, run_id: str) -> bool:
        if run_id in self.tracked:
            return False
        found = await self.ctx.runs.maybe(run_id)
        return found is None or found[0].state.terminal

    async def _carry_out(self, seen: Run, action: step.Action) -> None:
        run_id = seen.run_id
        match action:
            case step.Retry():
                await self._change(seen, Change(event=RunEvent.RETRY))
            case step.Redrive(times=times):
                run = await self.read_whole(seen)
                if run is None:
                    return
                metrics.child(metrics.REDRIVES, step="scheduled").inc()
                with _span(seen, "redrive"):
                    await redrive(self.ctx.publisher, run, times)
            case step.Lose(loss=loss, reason=reason):
                if loss is step.Loss.NOT_STARTED:
                    metrics.child(metrics.REDRIVES, step="assigned").inc()
                    self.ctx.log.info("assignment not started", run_id=run_id, attempt=seen.attempt, agent=seen.agent)
                else:
                    metrics.LEASES_EXPIRED.inc()
                    if loss is step.Loss.LEASE_EXPIRED:
                        self.ctx.log.info("run lease gone", run_id=run_id, attempt=seen.attempt, agent=seen.agent)
                await self._change(seen, Change(event=RunEvent.LOSE, reason=reason))
            case step.Release():
                await self._change(seen, Change(event=RunEvent.RELEASE))
            case step.Park():
                self.looked_at.discard(run_id)
                self.quiet.remove(run_id)
            case step.NeedHorizon():
                self._unsequenced.add(run_id)  # read at the end of this sweep, after the looks at the agents

    async def _still_foreign(self, lease: Lease, run_id: str) -> bool:
        """The claim judged against the run's stored record, not our copy: a copy that lags (the watch behind a
        re-placement, a NATS node lost meanwhile) makes the next attempt's honest claim look foreign."""
        found = await self.ctx.runs.maybe(run_id)
        if found is None:
            return False
        run = found[0]
        return foreign_claim(lease.writer, lease.value.holder, lease.value.attempt, run.agent, run.attempt)

    async def _take_away(self, lease: Lease, run: Run) -> None:
        """A claim on this run by an agent it was not placed on (a compromised or broken agent: its credential
        may write claims under its own name only, docs/security.md). Revoked, so that the run's own agent can
        take it; the run is then judged as one whose lease is gone. Counted and logged with the writer's name."""
        metrics.child(metrics.AUTH_FAILURES, kind="foreign_lease").inc()
        self.ctx.log.warning("foreign lease claim revoked", run_id=run.run_id, writer=lease.writer,
                             claimed_attempt=lease.value.attempt, assigned=run.agent, attempt=run.attempt)
        await self.ctx.leases.revoke(lease.key, f"claimed by {lease.writer}, not placed there", self.timing.lease_ttl)

    async def _change(self, seen: Run, change: Change) -> None:
        def make(run: Run) -> Change | None:
            # Act only if the run is still where we saw it; otherwise someone else moved it on.
            return change if same_step(run, seen) else None

        with _span(seen, str(change.event)):
            await self.records.change(seen.run_id, make)


def _claim(lease: Lease | None) -> step.Claim | None:
    if lease is None:
        return None
    return step.Claim(holder=lease.value.holder, attempt=lease.value.attempt, writer=lease.writer,
                      written_at=lease.written_at, ttl=lease.ttl, bound=lease.value.bound)


def _span(run: Run, action: str) -> AbstractContextManager[Span]:
    """A retry or re-drive is a further span in the run's own trace (its id is kept on the run record)."""
    return _tracer.start_as_current_span(f"reconcile {action}", context=context_from_trace_id(run.trace_id),
                                         attributes={"jetcron.run_id": run.run_id, "jetcron.job": run.job,
                                                     "jetcron.attempt": run.attempt, "jetcron.state": str(run.state)})

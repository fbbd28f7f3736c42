"""The reconciler: the queue is a hint, the run record is the truth. Re-drive runs whose step stalled.

What to do with a run is decided in `jetcron.core.lifecycle.reconcile.judge`; this module makes the reads a judgement
asks for. The index it judges from is `run_index`, and what it decides is written by `reconcile_actions`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from datetime import datetime, timedelta

from msgspec.structs import replace

from jetcron.bus.lease import Lease
from jetcron.core.errors import JetcronError
from jetcron.core.lifecycle import reconcile_steps as step
from jetcron.core.lifecycle.reconcile import Timing, Tracked, judge
from jetcron.core.models import Run
from jetcron.wire import subjects as s
from jetcron_services.run_tracker.ports import ReconcilerPorts
from jetcron_services.run_tracker.progress import Progress
from jetcron_services.run_tracker.reconcile_actions import ReconcileActions
from jetcron_services.run_tracker.records import Records
from jetcron_services.run_tracker.run_index import ActiveRuns, RunIndex

SWEEP_CONCURRENCY = 64
REDRIVES_PER_SWEEP = 16
"""Re-drives (a PlaceRun each, an acknowledged write) one sweep may send; the rest wait a re-drive period. A run
left `scheduled` is held by placement from its record already, and a backlog behind full agents once had the
tracker re-drive tens of thousands at once, writes that took the disk from the runs it was waiting for until no
run finished (bench/longlife.py). Four sweeps a second: 64 re-drives/s at most, ~3,800 in a minute."""


class Reconciler:
    """Keeps an index of non-terminal runs from the runs watch (no scans) and checks each on its own clock."""

    def __init__(self, ctx: ReconcilerPorts, records: Records) -> None:
        self.ctx = ctx
        settings = ctx.settings
        self.timing = Timing(lease_ttl=settings.run_lease_ttl, assign_stall=settings.assign_stall,
                             redrive_after=settings.redrive_after)
        self.index = RunIndex(self.timing)
        # The index's parts by their own names: the deadlines and the listing read `active`.
        self.tracked = self.index.tracked
        self.active: ActiveRuns = self.index.active
        self.quiet = self.index.quiet
        self.looked_at = self.index.looked_at
        self.awaiting = self.index.awaiting
        self.actions = ReconcileActions(ctx, records, self.timing)
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
        """A run's record changed (or was deleted): tell of it, and index it afresh."""
        if run is not None:
            self.seen(run)
            if run.state.terminal:
                self.ended(run, run_id in self.tracked, self.synced.is_set())
        self.index.on_record(run_id, run, revision)

    def known(self, run_id: str) -> tuple[Run, int] | None:
        """The last watched record of an active run and its revision, if the index keeps it whole
        (RunIndex.known)."""
        return self.index.known(run_id)

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

        await self.index.release_awaiting(now, self.progress.may_still_report)
        # Only the runs that could need something now get a task: creating one per active run every sweep
        # cost the tracker most of a core with 40,000 staged runs waiting for their due time.
        due = self.index.due(now)
        await asyncio.gather(*(one(run) for run in due))
        if self._unsequenced:
            with contextlib.suppress(JetcronError):
                self.index.sequence(self._unsequenced, await self.progress.horizon())
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
                self.index.store(run_id, kept)
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
                    # Nothing but its record can change it before then; walked every sweep instead, a herd's 100,000
                    # runs past their stall with live leases were most of the tracker's CPU while their reports waited.
                    self.index.leave_sweeps_until(run_id, until)
                    return
                case step.AskAgentIdle(agent=agent):
                    look = step.AgentIdle(idle=await self.progress.agent_idle_or_gone(agent))
                case step.ReadMemberLease(index=index):
                    member = await self.ctx.leases.read(s.gang_lease_key(run_id, seen.agents[index]))
                    look = step.MemberLease(index=index, claim=_claim(member))
                case step.TakeAway():
                    assert lease is not None
                    if not await self.actions.still_foreign(lease, run_id):
                        return  # our copy of the run was behind the claim: its record comes by the watch
                    await self.actions.take_away(lease, seen)
                    look = step.RunLease(claim=None, read_up_to=self.progress.read_up_to)
                case step.AskAgentReports(agent=agent, since=since):
                    pending = await self.progress.may_still_report(agent)
                    look = step.AgentReports(agent=agent, pending=pending, since=since,
                                             read_up_to=self.progress.read_up_to)
                case step.ReadUpstream(run_id=after):
                    look = step.Upstream(ended=await self._ended(after))
                case step.Park():
                    self.index.park(run_id)
                    return
                case step.NeedHorizon():
                    self._unsequenced.add(run_id)  # read at the end of this sweep, after the looks at the agents
                    return
                case _:
                    await self.actions.carry_out(seen, verdict.action)
                    return

    def _may_redrive(self, run_id: str, now: datetime) -> bool:
        """Whether this sweep may re-drive one more run; if not, the run leaves the sweeps for a re-drive period
        as it is (not counted as re-driven), and is judged again then. Only if this sweep still holds it, as for
        a Quiet verdict: a run whose record ended meanwhile is no longer tracked, and one its record re-indexed
        is timed by that record."""
        if self._redrives_left > 0:
            self._redrives_left -= 1
            return True
        self.index.leave_sweeps_until(run_id, now + self.timing.redrive_every)
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


def _claim(lease: Lease | None) -> step.Claim | None:
    if lease is None:
        return None
    return step.Claim(holder=lease.value.holder, attempt=lease.value.attempt, writer=lease.writer,
                      written_at=lease.written_at, ttl=lease.ttl, bound=lease.value.bound)

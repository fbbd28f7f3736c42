"""The reconciler: the queue is a hint, the run record is the truth. Re-drive runs whose step stalled."""

from __future__ import annotations

import asyncio
import contextlib
from contextlib import AbstractContextManager
from datetime import UTC, datetime, timedelta

from opentelemetry.trace import Span

from jetcron.bus.dispatch import dispatch
from jetcron.bus.lease import Lease
from jetcron.core import leases
from jetcron.core.due_index import DueIndex
from jetcron.core.errors import JetcronError
from jetcron.core.models import Run, RunState
from jetcron.core.run_state import RunEvent
from jetcron.core.runs import Change
from jetcron.services.run_tracker.progress import Progress
from jetcron.services.run_tracker.records import Records
from jetcron.services.runtime import Context
from jetcron.telemetry import metrics
from jetcron.telemetry.tracing import context_from_trace_id, tracer
from jetcron.wire import subjects as s

_tracer = tracer("run_tracker")
SWEEP_CONCURRENCY = 64
REPORT_WAIT_CAP = timedelta(seconds=300)
"""The longest a run whose lease is gone waits for its live agent's queued reports before it is called lost: a
run the agent lost track of is re-dispatched at most this much later, however busy that agent stays."""
_EARLIEST = datetime.min.replace(tzinfo=UTC)


class Reconciler:
    """Keeps an index of non-terminal runs from the runs watch (no scans) and checks each on its own clock."""

    def __init__(self, ctx: Context, records: Records) -> None:
        self.ctx = ctx
        self.records = records
        self.active: dict[str, Run] = {}
        self.quiet = DueIndex(1)
        """Runs no sweep could act on before a time (`_quiet_until`), by that time: a herd staged minutes ahead
        is tens of thousands of assigned runs that need no look until their due time, and a sweep must not
        even walk them (a scan of 100,000 every 0.25 s was 40 % of the tracker's CPU)."""
        self.looked_at: set[str] = set()
        """Runs every sweep looks at (running, gangs, waiting, or past their quiet time) until their record
        changes."""
        self.revisions: dict[str, int] = {}
        """Run id -> the revision of its record in `active`: the tracker's CAS starts from it (Records.known)."""
        self.missing_lease: dict[str, datetime] = {}
        self.missing_seq: dict[str, int] = {}
        """Run id -> the events stream's last sequence after its lease was first seen gone (see progress.py)."""
        self._unsequenced: set[str] = set()
        self.progress = Progress(ctx)
        self.checked: dict[str, datetime] = {}
        self.next_look: dict[str, datetime] = {}
        """Run id -> when its live lease could first have expired: no look before then."""
        self.awaiting: dict[str, dict[str, datetime]] = {}
        """Agent -> runs whose lease is gone while that agent said reports were still to go (since when their
        lease was first seen gone): out of the sweeps, released together once it has none left (or is gone)."""
        self.cleared: set[str] = set()
        """Runs released from `awaiting`: their agent has nothing left to report (or went), so they are judged."""
        self.gang_checked: dict[str, datetime] = {}
        self.gang_missing: dict[str, datetime] = {}
        self.synced = asyncio.Event()

    async def watch(self) -> None:
        async for run_id, run, revision in self.ctx.runs.watch():
            if not run_id:
                self.synced.set()
                continue
            self.on_record(run_id, run, revision)

    def on_record(self, run_id: str, run: Run | None, revision: int) -> None:
        """A run's record changed (or was deleted): index it afresh."""
        old = self.active.get(run_id)
        if old is None or run is None or old.state != run.state or old.attempt != run.attempt:
            self._forget_missing(run_id, old)
        if run is None or run.state.terminal:
            self.active.pop(run_id, None)
            self.quiet.remove(run_id)
            self.looked_at.discard(run_id)
            self.revisions.pop(run_id, None)
            self.checked.pop(run_id, None)
            self.next_look.pop(run_id, None)
            self._forget_gang(run_id)
            return
        self.active[run_id] = run
        quiet = self._quiet_until(run)
        if quiet == _EARLIEST:
            self.quiet.remove(run_id)
            self.looked_at.add(run_id)
        else:
            self.looked_at.discard(run_id)
            self.quiet.set(run_id, quiet)
        self.revisions[run_id] = revision

    def _forget_missing(self, run_id: str, old: Run | None) -> None:
        """The record moved on (or ended): what was judged of its lease no longer applies."""
        self.missing_lease.pop(run_id, None)
        self.missing_seq.pop(run_id, None)
        self.cleared.discard(run_id)
        if old is not None and old.agent in self.awaiting:
            runs = self.awaiting[old.agent]
            runs.pop(run_id, None)
            if not runs:
                del self.awaiting[old.agent]

    async def _release_awaiting(self, now: datetime) -> None:
        """Runs waiting on an agent's queued reports go back to the sweep once it has none left or is gone (and
        any of them after REPORT_WAIT_CAP). Read before this sweep's events horizon: a heartbeat that said none
        were left was written after every one of them was acked, so that horizon covers them."""
        for agent, runs in list(self.awaiting.items()):
            done = not await self.progress.may_still_report(agent)
            for run_id in [r for r, since in runs.items() if done or now - since >= REPORT_WAIT_CAP]:
                del runs[run_id]
                if run_id in self.active:
                    self.cleared.add(run_id)
                    self.quiet.remove(run_id)
                    self.looked_at.add(run_id)
            if not runs:
                del self.awaiting[agent]

    def known(self, run_id: str) -> tuple[Run, int] | None:
        """The last watched record of an active run and its revision (maybe stale: Records.change checks)."""
        run = self.active.get(run_id)
        return None if run is None else (run, self.revisions[run_id])

    async def sweep(self, now: datetime) -> None:
        """Check every active run; those that need a read or a write proceed concurrently (many agents can
        die at once, and their runs should not queue behind each other's round trips)."""
        ttl = self.ctx.settings.run_lease_ttl
        gate = asyncio.Semaphore(SWEEP_CONCURRENCY)
        await self.progress.refresh()

        async def one(run: Run) -> None:
            async with gate:
                with contextlib.suppress(JetcronError):
                    await self._check(run, now, ttl)

        await self._release_awaiting(now)
        # Only the runs that could need something now get a task: creating one per active run every sweep
        # cost the tracker most of a core with 40,000 staged runs waiting for their due time.
        self.looked_at.update(self.quiet.pop_due(0, now, limit=len(self.active) + 1))
        due = [self.active[r] for r in self.looked_at]
        await asyncio.gather(*(one(run) for run in due))
        if self._unsequenced:
            with contextlib.suppress(JetcronError):
                horizon = await self.progress.horizon()
                for run_id in self._unsequenced:
                    if run_id in self.missing_lease:
                        self.missing_seq.setdefault(run_id, horizon)
                self._unsequenced.clear()

    def _quiet_until(self, run: Run) -> datetime:
        """Before this time `_check` does nothing with `run` as it stands (the record changes it, not time):
        a retry waits for its due time, a scheduled run for its re-drive, a single-host assignment for its
        stall. The rest (running, gangs, waiting) are looked at every sweep, with their own finer clocks."""
        if run.state is RunState.RETRY_WAIT and len(run.agents) <= 1:
            return run.due_at
        if run.state is RunState.SCHEDULED and len(run.agents) <= 1:
            return run.due_at + self._redrive_every
        if run.state is RunState.ASSIGNED and run.assigned_at is not None and len(run.agents) <= 1:
            return run.assigned_at + self._stall(run)
        return _EARLIEST

    def _stall(self, run: Run) -> timedelta:
        """How long an assignment may go unstarted: the stall, plus a staged run's wait for its due time."""
        assert run.assigned_at is not None
        return timedelta(seconds=self.ctx.settings.assign_stall) + max(run.due_at - run.assigned_at, timedelta())

    async def _check(self, run: Run, now: datetime, ttl: float) -> None:
        if run.state is RunState.RETRY_WAIT and run.due_at <= now:
            await self._change(run, Change(event=RunEvent.RETRY))
        elif run.state is RunState.SCHEDULED and now - run.due_at > (every := self._redrive_every):
            last = self.checked.get(run.run_id)
            if last is None or now - last > every:
                self.checked[run.run_id] = now
                metrics.REDRIVES.labels(step="scheduled").inc()
                with _span(run, "redrive"):
                    await dispatch(self.ctx.js, run, redrive=int((now - run.due_at) / every))
        elif len(run.agents) > 1 and (lost := await self._gang_member_gone(run, now, ttl)):
            metrics.LEASES_EXPIRED.inc()
            await self._change(run, Change(event=RunEvent.LOSE, reason=lost))
        elif run.state is RunState.ASSIGNED and run.assigned_at is not None:
            # (the agent check first: it is cached per sweep, the lease look is a read per run)
            if (now - run.assigned_at > self._stall(run) and await self.progress.agent_idle_or_gone(run.agent)
                    and await self._lease_gone(run, now, ttl)):
                metrics.REDRIVES.labels(step="assigned").inc()
                self.ctx.log.info("assignment not started", run_id=run.run_id, attempt=run.attempt, agent=run.agent)
                await self._change(run, Change(event=RunEvent.LOSE, reason="assignment not started in time"))
        elif run.state is RunState.RUNNING and await self._lease_gone(run, now, ttl):
            metrics.LEASES_EXPIRED.inc()
            self.ctx.log.info("run lease gone", run_id=run.run_id, attempt=run.attempt, agent=run.agent)
            await self._change(run, Change(event=RunEvent.LOSE, reason=f"lease expired on {run.agent}: agent lost"))
        elif run.state is RunState.WAITING and run.after and run.after not in self.active:
            found = await self.ctx.runs.maybe(run.after)
            if found is None or found[0].state.terminal:
                await self._change(run, Change(event=RunEvent.RELEASE))

    def _forget_gang(self, run_id: str) -> None:
        if self.gang_checked or self.gang_missing:
            prefix = f"{run_id}/"
            for book in (self.gang_checked, self.gang_missing):
                for key in [k for k in book if k.startswith(prefix)]:
                    del book[key]

    @property
    def _redrive_every(self) -> timedelta:
        return timedelta(seconds=self.ctx.settings.redrive_after)

    async def _lease_gone(self, run: Run, now: datetime, ttl: float) -> bool:
        """Gone on two looks `confirm` apart, and every report sent before that read by the tracker.

        A live lease is not looked at again before it could expire (its last write + TTL, by the server's
        clock), so a run costs about one read per renewal; a lapsed one is seen within a sweep, and the run
        is re-dispatched within about TTL + 2 s of its agent's death (docs/guarantees.md). A finish report
        still queued for the tracker holds the decision back (progress.py).
        """
        # Expiry is judged by the server and final (a late renewal fails its revision check), and reports are
        # covered by the sequence rule: the second look only guards against acting on one odd read.
        confirm = timedelta(seconds=min(ttl / 4, 0.5))
        first = self.missing_lease.get(run.run_id)
        last = self.checked.get(run.run_id)
        if first is not None:
            # the confirming look `confirm` after the first; then every confirm/2 while reports are pending
            due = first + confirm if last is None or last <= first else last + confirm / 2
        else:
            due = self.next_look.get(run.run_id, now)
        if now < due:
            return False
        self.checked[run.run_id] = now
        lease = await self.ctx.leases.read(s.run_lease_key(run.run_id))
        if lease is not None and lease.value.holder and leases.foreign_claim(
                lease.writer, lease.value.holder, lease.value.attempt, run.agent, run.attempt):
            await self._take_away(lease, run, ttl)
            lease = None
        if lease is not None and lease.value.holder:
            self.missing_lease.pop(run.run_id, None)
            self.missing_seq.pop(run.run_id, None)
            self.cleared.discard(run.run_id)
            # The server's expiry, but never further ahead than the lease's TTL from our own now: our clock may
            # run behind the server's (a skewed host), and then a dead agent's run would wait the skew too.
            granted = timedelta(seconds=lease.ttl or ttl)
            expires = min((lease.written_at or now) + granted, now + granted)
            look = self.next_look[run.run_id] = max(expires, now + timedelta(seconds=min(ttl / 4, 1.0)))
            if len(run.agents) <= 1 and run.run_id in self.looked_at:
                # Nothing but its record (which re-indexes it) can change it before then: out of the sweeps
                # until then. Walked every sweep instead, a herd's 100,000 runs past their stall with live
                # leases were most of the tracker's CPU while their reports waited for it.
                self.looked_at.discard(run.run_id)
                self.quiet.set(run.run_id, look)
            return False
        first = self.missing_lease.setdefault(run.run_id, now)
        if now - first < confirm:
            return False
        if (run.run_id not in self.cleared and now - first < REPORT_WAIT_CAP
                and await self.progress.may_still_report(run.agent)):
            # Its agent is alive and still has reports to send: this run's may be one of them (progress.py).
            assert run.agent is not None
            self.awaiting.setdefault(run.agent, {})[run.run_id] = first
            self.looked_at.discard(run.run_id)
            self.quiet.remove(run.run_id)
            return False
        seq = self.missing_seq.get(run.run_id)
        if seq is None:
            self._unsequenced.add(run.run_id)  # the horizon is read at the end of this sweep, after the look above
            return False
        # a report sent before the lease went may still be queued for the tracker
        return self.progress.reports_read(seq)

    async def _take_away(self, lease: Lease, run: Run, ttl: float) -> None:
        """A claim on this run by an agent it was not placed on (a compromised or broken agent: its credential
        may write claims under its own name only, docs/security.md). Revoked, so that the run's own agent can
        take it; the run is then judged as one whose lease is gone. Counted and logged with the writer's name."""
        metrics.AUTH_FAILURES.labels(kind="foreign_lease").inc()
        self.ctx.log.warning("foreign lease claim revoked", run_id=run.run_id, writer=lease.writer,
                             claimed_attempt=lease.value.attempt, assigned=run.agent, attempt=run.attempt)
        await self.ctx.leases.revoke(lease.key, f"claimed by {lease.writer}, not placed there", ttl)

    async def _gang_member_gone(self, run: Run, now: datetime, ttl: float) -> str | None:
        """For a gang: which member let its lease `gang.<agent>.<run>` lapse (its host died), if one did.

        Members take their leases when assigned, so one is judged missing only once an assignment would
        have stalled, or a lease TTL after the gang started; and, as for run leases, on two looks TTL/2
        apart. Losing the run re-dispatches the whole gang; the other members see the record move on
        and stop (services/agent/gang.py).
        """
        if run.state is RunState.ASSIGNED and run.assigned_at is not None:
            since = run.assigned_at + timedelta(seconds=self.ctx.settings.assign_stall) + max(
                run.due_at - run.assigned_at, timedelta())
        elif run.state is RunState.RUNNING and run.started_at is not None:
            since = run.started_at + timedelta(seconds=ttl)
        else:
            return None
        key = f"{run.run_id}/{run.attempt}"
        last = self.gang_checked.get(key)
        if now < since or (last is not None and now - last < timedelta(seconds=ttl / 4)):
            return None
        self.gang_checked[key] = now
        for agent in run.agents[1:]:
            lease = await self.ctx.leases.read(s.gang_lease_key(run.run_id, agent))
            missing = f"{key}/{agent}"
            if lease is not None and lease.value.holder and lease.value.attempt == run.attempt:
                self.gang_missing.pop(missing, None)
                continue
            first = self.gang_missing.setdefault(missing, now)
            if now - first >= timedelta(seconds=ttl / 2):
                return f"gang member {agent} lost (its lease lapsed): the gang is torn down and re-queued"
        return None

    async def _change(self, seen: Run, change: Change) -> None:
        def make(run: Run) -> Change | None:
            # Act only if the run is still where we saw it; otherwise someone else moved it on.
            return change if (run.state, run.attempt) == (seen.state, seen.attempt) else None

        with _span(seen, str(change.event)):
            await self.records.change(seen.run_id, make)


def _span(run: Run, action: str) -> AbstractContextManager[Span]:
    """A retry or re-drive is a further span in the run's own trace (its id is kept on the run record)."""
    return _tracer.start_as_current_span(f"reconcile {action}", context=context_from_trace_id(run.trace_id),
                                         attributes={"jetcron.run_id": run.run_id, "jetcron.job": run.job,
                                                     "jetcron.attempt": run.attempt, "jetcron.state": str(run.state)})

"""One attempt on this agent: wait for its due time, run it under its lease, stream output, report."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from datetime import datetime

from opentelemetry.context import Context as TraceContext

from jetcron import faults
from jetcron.bus.lease import Lease
from jetcron.core.clock import next_wait
from jetcron.core.lifecycle.attempt_state import REPORTS, AttemptEvent, AttemptPhase, advance, allows
from jetcron.core.lifecycle.retention import stream_ttl
from jetcron.telemetry import metrics
from jetcron.telemetry.tracing import messaging_span, tracer
from jetcron.wire import subjects as s
from jetcron.wire.messages import AssignRun
from jetcron_services.agent.attempt_deps import AttemptDeps
from jetcron_services.agent.attempt_reports import AttemptReports
from jetcron_services.agent.child import Child
from jetcron_services.agent.claim import RunClaim
from jetcron_services.agent.host.executor import Outcome
from jetcron_services.agent.ports import AttemptPorts, SleepUntilPorts

# A run that ends sooner than this reports once: its finish carries the start (one write instead of two).
START_REPORT_DELAY = 0.25
_tracer = tracer("agent")
P, E = AttemptPhase, AttemptEvent

Settled = Callable[[], None]


def _nothing() -> None:
    pass


async def _no_wait(_attempt: Attempt) -> None:
    pass


async def sleep_until(ctx: SleepUntilPorts, at: datetime) -> None:
    """Coarse sleep to ~50 ms before, then a short precise one (jetcron.core.clock.next_wait).

    Already due (a herd's attempts, started as they come due): one clock read, no sleep."""
    while (left := (at - ctx.clock.now()).total_seconds()) > 0:
        await asyncio.sleep(next_wait(left))


class Attempt:
    """Its phases and their moves are jetcron.core.lifecycle.attempt_state's (`_apply` refuses any other); the agent
    drives it. Its parts are its claim on the run (claim.py), its child (child.py) and its reports
    (attempt_reports.py), each handed what it needs of the attempt when it acts and holding none of it."""

    renews_while_reporting = False
    """Whether the lease is still renewed once the child has ended (gangs: the tracker judges a gang by each
    member's own lease, which no heartbeat stands in for)."""
    may_stage = True
    """Whether it may wait for its due time as an entry in the agent's index, with no task: its first lease
    covers the wait (first_grant). A gang member must watch its run record meanwhile (gang.py)."""

    def __init__(self, ctx: AttemptPorts, deps: AttemptDeps, cmd: AssignRun, lease: Lease,
                 env: Callable[[], dict[str, str]], parent: TraceContext, granted: float | None = None,
                 asked_at: float | None = None) -> None:
        self.ctx, self.deps, self.cmd = ctx, deps, cmd
        self.claim = RunClaim(lease, ctx.settings, granted, asked_at)
        self.child = Child(ctx, deps, cmd, env)
        self.ttl = stream_ttl(cmd.keep_seconds, ctx.settings.history)
        """Seconds each of this attempt's events and output chunks is kept (the run's retention)."""
        # The fencing token is the one the assignment carries (its record's `assigned` revision), or else the
        # revision that granted the lease; renewals move the lease's revision on, not the token.
        self.first_token = cmd.token or lease.token
        self.parent = parent
        """The trace context the assignment carried: every span and report of this attempt continues it."""
        self.reports = AttemptReports(ctx, deps, cmd, token=self.first_token, ttl=self.ttl, parent=parent)
        self.started_at: datetime | None = None
        self.pid = 0
        self.phase = P.STAGED
        self.why: str | None = None
        """Why it was fenced or handed back: the reason the child is stopped with, and the hand-back's."""
        self.graceful = False
        """Fenced with a grace period (a cancel, a preemption): its child is stopped with SIGTERM first and may save
        a checkpoint meanwhile; a later fence does not cut that short."""
        self.grace_seconds: float | None = None
        """That grace period (a preemption's own); None: the agent's kill grace."""
        self.before_spawn: Callable[[Attempt], Awaitable[None]] = _no_wait
        """Waits until the attempts this one must not overlap have ended (the agent's rule: Agent.clear_for). Given
        the attempt when called rather than holding it: one that held it would make the attempt a reference cycle,
        which only the cycle collector frees, in a full pass that may come hundreds of thousands of runs later
        (docs/benchmarks.md, "What an agent holds")."""
        self.done = asyncio.Event()
        """Set when run() has stopped waiting for the child (the keeper and the gang watch stop)."""
        self._settled: Settled = _nothing
        self.seq = 0
        """Output chunks sent so far: the next one's place in the message ids."""

    async def output(self, stream: str, data: bytes) -> None:
        capped = self.reports.capped(data)
        if capped is None:  # past the run's cap
            return
        self.seq += 1
        label, step = self._log_label(stream)
        await self.reports.output(capped, label, step)

    def _log_label(self, stream: str) -> tuple[str, str]:
        """The stream header and the message-id step of the next output chunk."""
        return stream, f"log{self.seq}"

    async def keep_lease(self) -> None:
        """Renew the claim while the child may run, fencing the attempt if it is lost (RunClaim.keep)."""
        await self.claim.keep(self.ctx, self, over=lambda: self.done.is_set() or self._renewals_over)

    @property
    def _renewals_over(self) -> bool:
        # Fenced: the lease is no longer ours to renew, and a renewal finding it revoked must not cut a graceful
        # stop short (a cancel's or a preemption's grace, in which the child may save a checkpoint).
        return self.phase is P.FENCED or (self.phase in REPORTS and not self.renews_while_reporting)

    @property
    def stopping(self) -> bool:
        """Its child is being stopped (fenced, or handed back) and the attempt has not ended yet."""
        return self.phase in (P.FENCED, P.HANDED_BACK) and not self.done.is_set()

    def _apply(self, event: AttemptEvent) -> None:
        self.phase = advance(self.phase, event, run_id=self.cmd.run_id, attempt=self.cmd.attempt)

    def _exited(self) -> None:
        """The child has ended; its report is next: the lease keeper stops (or never starts)."""
        self._apply(E.EXIT)
        self.claim.wake.set()
        if self._renewals_over:
            self.claim.disarm()

    def fence(self, why: str, *, grace: bool = False, grace_seconds: float | None = None) -> None:
        """Stop for good: the lease lapsed, was taken or revoked, or the attempt is superseded, cancelled or
        preempted. The child is killed at once, or with `grace` (a cancel, a preemption) stopped as a timeout stops
        it: SIGTERM, the grace period (`grace_seconds`, else the kill grace), SIGKILL. Nothing more is reported,
        and the lease is not released (it may be another's by now). Fencing again kills again, but for a graceful
        stop, which runs out (the child may be saving a checkpoint); an ended attempt has nothing left to stop."""
        if self.phase is not P.FENCED:
            if not allows(self.phase, E.FENCE):
                return
            # An operator's clue to a run that ran twice or was killed: its agent gave up its lease (and why).
            self.ctx.log.info("attempt fenced", run_id=self.cmd.run_id, attempt=self.cmd.attempt, reason=why,
                              phase=str(self.phase))
            self._apply(E.FENCE)
            self.why = why
            self.graceful, self.grace_seconds = grace, grace_seconds
            self._fenced()
        elif self.graceful and not grace:
            return
        self.child.stop(why, grace=grace, seconds=grace_seconds)

    def _fenced(self) -> None:
        """Just fenced (gangs: a member holding its lease stops holding it)."""

    def keeper_delay(self) -> float:
        """Seconds from now until the lease keeper must run: its first renewal (RunClaim.arm)."""
        return self.claim.first_renewal() - time.monotonic()

    async def run(self, settled: Settled | None = None) -> None:
        """The whole attempt: wait for the due time, execute, report, release the lease (or leave it), give the
        run back if handed back. `settled` is called once it has started, or at its end if it never starts (the
        agent starts a staged herd as a stream, waiting.py)."""
        cmd = self.cmd
        self._settled = settled or _nothing
        if self.claim.lease.token:  # an unclaimed one's keeper is armed once its claim is written (_claim_late)
            self.claim.arm(self)
        try:
            if self.phase is P.STAGED:  # fenced or handed back, it ends before it starts: no need to wait
                self._apply(E.LAUNCH)
                await sleep_until(self.ctx, cmd.due_at)
                await self.before_spawn(self)
            with messaging_span(_tracer, "process", s.assign_subject(cmd.agent), parent=self.parent,
                                run_id=cmd.run_id, job=cmd.job, attempt=cmd.attempt) as span:
                outcome = await self.child.run(self, cmd.spec.command)
                span.set_attribute("jetcron.outcome", outcome.outcome)
                faults.point("agent.after_exit")
                if self.phase in (P.STARTING, P.RUNNING):  # neither fenced nor handed back meanwhile
                    self._exited()
                    await self._report(outcome)  # inside the span: the report carries its traceparent
        finally:
            self._settled()
            self.done.set()
            if self.deps.spares is not None:
                # The child has ended, or never started: no join to stall now. After the finish report, not
                # before: making a spare forks on this loop, and the report would wait behind the fork.
                self.deps.spares.refill()
            await self.claim.stop()
            await self.reports.settle_start()
            await self.child.clear_room()
            # After a success no attempt follows, so the lease may simply expire: one write saved per run.
            if self.phase not in (P.FENCED, P.SUCCEEDED):
                await faults.slow_point("agent.before_release")  # tests: a slow release strands nothing
                await self.claim.release(self.ctx, self.deps.agent_nonce)
            try:
                if self.phase is P.HANDED_BACK:  # and not fenced since
                    await self._give_back(self.why or "handed back")
            finally:
                self._apply(E.END)

    async def spawned(self, pid: int) -> None:
        """Its child has started (pid 0: a simulated one)."""
        if self.phase is P.STARTING:
            self._apply(E.SPAWN)
        self.started_at = now = self.ctx.clock.now()
        self.pid = pid
        metrics.RUN_WAIT.observe(max(0.0, (now - self.cmd.due_at).total_seconds()))
        self.reports.start = asyncio.create_task(self._report_start_later())
        # Started: the next of a herd may start now. Its reports wait for room in the window instead; gating
        # the starts on the reports' acks made a herd start only as fast as the tracker took reports in.
        self._settled()

    async def _report_start_later(self) -> None:
        await asyncio.sleep(START_REPORT_DELAY)
        self.reports.publishing = True  # from here the finish waits for it: the claim and the start land first
        if not self.claim.lease.token and not await self._claim_late():
            return
        assert self.started_at is not None
        await self.reports.started(self.started_at, self.pid)

    async def _claim_late(self) -> bool:
        """Write the claim of an attempt that started without one (RunClaim.write_late); whether it holds it."""
        return await self.claim.write_late(self.ctx, self)

    async def _report(self, outcome: Outcome) -> None:
        await self.reports.settle_start()
        await self.reports.finished(outcome, started_at=self.started_at, pid=self.pid)
        if outcome.outcome == "succeeded" and self.phase is P.REPORTING:  # not fenced while it reported
            self._apply(E.SUCCEED)

    async def hand_back(self, why: str) -> None:
        """Drain: stop the child; the run is given back once the child has ended and the lease is released
        (run()). Refused, doing nothing, once the child has ended and reported (the report says how it ended),
        once fenced (the lease is not ours to give back), or when handed back already."""
        if not allows(self.phase, E.HAND_BACK):
            return
        self._apply(E.HAND_BACK)
        self.why = why
        self.child.stop(why, grace=True)
        await self._handing_back(why)

    async def _handing_back(self, why: str) -> None:
        """Just handed back (gang members: give the whole gang back now)."""

    async def _give_back(self, why: str) -> None:
        """Tell the trackers the run is given back, once its lease is released (AttemptReports.handed_back)."""
        await self.reports.handed_back(why, started=self.child.execution is not None or self.started_at is not None)

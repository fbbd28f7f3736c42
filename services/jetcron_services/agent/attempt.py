"""One attempt on this agent: wait for its due time, run it under its lease, stream output, report."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial

from opentelemetry.context import Context as TraceContext

from jetcron import faults
from jetcron.bus.lease import Lease
from jetcron.core.clock import next_wait
from jetcron.core.errors import JetcronError, LeaseLost
from jetcron.core.host.launch_plan import HostFacts, container_name, plan
from jetcron.core.host.sim import SimExecution
from jetcron.core.lifecycle import leases
from jetcron.core.lifecycle.attempt_state import REPORTS, AttemptEvent, AttemptPhase, advance, allows
from jetcron.core.lifecycle.handoff import report_directly
from jetcron.core.lifecycle.retention import stream_ttl
from jetcron.telemetry import metrics
from jetcron.telemetry.tracing import messaging_span, tracer
from jetcron.wire import subjects as s
from jetcron.wire.messages import AssignRun, RunFinished, RunHandedBack, RunStarted
from jetcron_services.agent.host import container as containers
from jetcron_services.agent.host.confine import JobUser, root_refusal
from jetcron_services.agent.host.executor import Execution, Outcome
from jetcron_services.agent.host.limits import RunLimits
from jetcron_services.agent.host.offer import HostSetup
from jetcron_services.agent.host.scratch import NoRoom, Room, Scratches
from jetcron_services.agent.host.spares import SparePool
from jetcron_services.agent.host.strays import StrayGuard
from jetcron_services.agent.reports import FinishBatches, ReportWindow
from jetcron_services.agent.run_creds import run_credential
from jetcron_services.agent.secrets import resolve_secrets
from jetcron_services.runtime import Context

TRUNCATED = b"\n[jetcron: output truncated at the per-run cap]\n"
# A run that ends sooner than this reports once: its finish carries the start (one write instead of two).
START_REPORT_DELAY = 0.25
RELEASE_RETRY = 1.0
"""Seconds between tries to release a bound claim while the storage does not answer (Attempt._release), and to
write a late claim (Attempt._claim_late)."""
_tracer = tracer("agent")
P, E = AttemptPhase, AttemptEvent

Settled = Callable[[], None]


def _nothing() -> None:
    pass


async def _no_wait(_attempt: Attempt) -> None:
    pass


async def sleep_until(ctx: Context, at: datetime) -> None:
    """Coarse sleep to ~50 ms before, then a short precise one (jetcron.core.clock.next_wait).

    Already due (a herd's attempts, started as they come due): one clock read, no sleep."""
    while (left := (at - ctx.clock.now()).total_seconds()) > 0:
        await asyncio.sleep(next_wait(left))


@dataclass(frozen=True)
class AttemptDeps:
    """What every attempt on this agent shares: the host's side of running a child, and the reports' window."""

    strays: StrayGuard
    """The agent's process groups and containers, known to its reaper."""
    setup: HostSetup
    reports: ReportWindow = field(default_factory=lambda: ReportWindow(1, hold=0.0))
    """The agent's reports in flight (RunStarted, RunFinished), bounded (reports.py)."""
    user: JobUser | None = None
    """Who jobs run as (None: the agent's own user)."""
    spares: SparePool | None = None
    """Children already in run groups (host/spares.py); None: every run is spawned."""
    scratches: Scratches | None = None
    """Where a child gets its scratch, uid and private /tmp (host/scratch.py); None: it starts in the agent's
    working directory, with the agent's view of the host (tests of the lifecycle alone)."""
    sim: SimExecution = field(default_factory=SimExecution)
    """How long a simulated attempt runs and how it exits (agent_sim only; sim.py)."""
    agent_nonce: Callable[[], str] = lambda: ""
    """The nonce of the agent lease held now ("" while none is): a bound claim is the agent's while it matches."""
    finishes: FinishBatches | None = None
    """Finish reports handed to the trackers directly; None: each goes to the events stream (`report_by` stream)."""


class Attempt:
    """Its phases and their moves are jetcron.core.lifecycle.attempt_state's (`_apply` refuses any other); the agent
    drives it."""

    renews_while_reporting = False
    """Whether the lease is still renewed once the child has ended (gangs: the tracker judges a gang by each
    member's own lease, which no heartbeat stands in for)."""
    may_stage = True
    """Whether it may wait for its due time as an entry in the agent's index, with no task: its first lease
    covers the wait (first_grant). A gang member must watch its run record meanwhile (gang.py)."""

    def __init__(self, ctx: Context, deps: AttemptDeps, cmd: AssignRun, lease: Lease,
                 env: Callable[[], dict[str, str]], parent: TraceContext, granted: float | None = None,
                 asked_at: float | None = None) -> None:
        self.ctx = ctx
        self.deps = deps
        self.room: Room | None = None
        """This attempt's scratch and uid, from just before its child starts until it has ended."""
        self.window = deps.reports
        """The agent's reports in flight (RunStarted, RunFinished): a herd's reports queue here, its starts do not."""
        self.bound = lease.value.bound
        """The agent lease nonce the claim is bound to; "" for a gang member's, which is its own."""
        self.lease_ttl = ctx.settings.run_claim_ttl if self.bound else ctx.settings.run_lease_ttl
        """The claim's TTL: a bound one is renewed rarely (its liveness is the agent's lease), its own every TTL/3."""
        self.granted = self.lease_ttl if granted is None else granted
        """Seconds the lease was taken for: a staged run's first lease also covers its wait (first_grant)."""
        self.leased_at = time.monotonic() if asked_at is None else asked_at
        """Monotonic time the lease write was sent: the server's expiry is never earlier than this + granted."""
        self.cmd = cmd
        self.ttl = stream_ttl(cmd.keep_seconds, ctx.settings.history)
        """Seconds each of this attempt's events and output chunks is kept (the run's retention)."""
        self.lease = lease
        self.env = env
        """Builds the child's environment when it starts: held from assignment, tens of thousands of staged
        attempts' copies of it were much of what the cycle collector walked in a herd (and a sim runs none)."""
        self.parent = parent
        """The trace context the assignment carried: every span and report of this attempt continues it."""
        self.execution: Execution | None = None
        self._sim_end: asyncio.Event | None = None
        """Set when a simulated attempt's "child" is stopped (fenced, handed back): it has none to kill."""
        self.started_at: datetime | None = None
        self.pid = 0
        self.start_report: asyncio.Task[None] | None = None
        self.keeper: asyncio.Task[None] | None = None
        """Renews the lease; started at the first renewal (keeper_delay), if the attempt is still on by then."""
        self._keeper_timer: asyncio.TimerHandle | None = None
        self._rewake = asyncio.Event()
        """Wakes the lease keeper to stop: the attempt is done, or its child has ended."""
        self._start_publishing = False
        """The start report has begun to publish: it is let land before the finish, no longer cancelled."""
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
        self.sent = 0
        self.seq = 0
        # The fencing token is the one the assignment carries (its record's `assigned` revision), or else the
        # revision that granted the lease; renewals move the lease's revision on, not the token.
        self.first_token = cmd.token or lease.token

    async def output(self, stream: str, data: bytes) -> None:
        cap = self.ctx.settings.log_cap_bytes
        if self.sent >= cap:
            return
        if self.sent + len(data) > cap:
            data = data[: cap - self.sent] + TRUNCATED
        self.sent += len(data)
        self.seq += 1
        label, step = self._log_label(stream)
        with contextlib.suppress(JetcronError):
            await self.ctx.publisher.publish(s.logs_subject(self.cmd.run_id, self.cmd.agent), data,
                                             headers={s.HDR_LOG_STREAM: label},
                                             msg_id=s.msg_id(self.cmd.run_id, self.cmd.attempt, step),
                                             ttl=self.ttl)

    def _log_label(self, stream: str) -> tuple[str, str]:
        """The stream header and the message-id step of the next output chunk."""
        return stream, f"log{self.seq}"

    async def keep_lease(self) -> None:
        """Renew at TTL/3; kill the child ourselves if the lease is taken or cannot be renewed in time.

        The deadline (last renewal sent + TTL - margin) is checked on our own monotonic clock before each
        renewal and bounds each renewal's wait: a partition or a SIGSTOP must not let the child outlive a
        lease the server has already expired (another attempt may hold it by then).

        Once the child has ended the lease is no longer renewed: it fences nothing any more, and its report
        queued here is covered by the agent's heartbeat (`pending_reports`), which the tracker waits on before it
        calls a run with a lapsed lease lost. Renewed instead, the finished attempts of a 100,000 herd waiting
        minutes for the tracker wrote hundreds of renewals a second at the instant, the busiest moment; those
        that did not land in time made runs run twice.
        """
        ttl = self.lease_ttl
        renewed, granted = self.leased_at, self.granted
        while not (self.done.is_set() or self._renewals_over):
            self._rewake.clear()
            wake = leases.renew_at(renewed, granted, ttl)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._rewake.wait(), timeout=max(0.0, wake - time.monotonic()))
            if self.done.is_set() or self._renewals_over:
                return
            deadline = leases.fence_at(renewed, granted, ttl)
            sent = time.monotonic()
            if sent >= deadline:
                self.fence(f"lease not renewed for {sent - renewed:.1f}s (paused or cut off)")
                return
            try:
                self.lease = await asyncio.wait_for(self.ctx.leases.renew(self.lease, ttl), timeout=deadline - sent)
                renewed, granted = sent, ttl
            except LeaseLost:
                self.fence("lease taken (cancelled or re-dispatched)")
                return
            except (JetcronError, TimeoutError):
                metrics.HEARTBEAT_FAILURES.inc()
                if time.monotonic() >= deadline:
                    self.fence("lease could not be renewed in time")
                    return

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
        self._rewake.set()
        if self._renewals_over and self._keeper_timer is not None:
            self._keeper_timer.cancel()

    def lease_covers(self, at: float) -> bool:
        """The first lease still holds at monotonic time `at` (before any renewal: a waiting attempt's)."""
        return at < leases.fence_at(self.leased_at, self.granted, self.lease_ttl)

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
        self._end_child(why, grace=grace, seconds=grace_seconds)

    def _end_child(self, why: str, *, grace: bool, seconds: float | None = None) -> None:
        """Kill the child's group now, or with `grace` stop it as a timeout does (SIGTERM, grace, SIGKILL)."""
        if self.execution is not None:
            if grace:
                self.execution.stop(why, seconds)
            else:
                self.execution.kill_now(why)
        elif self._sim_end is not None:
            self._sim_end.set()

    def _fenced(self) -> None:
        """Just fenced (gangs: a member holding its lease stops holding it)."""

    def keeper_delay(self) -> float:
        """Seconds from now until the lease keeper must run: its first renewal. Most attempts (every sim one, a
        herd's) end before it, and a task waiting meanwhile costs a herd's start rate for nothing."""
        return leases.renew_at(self.leased_at, self.granted, self.lease_ttl) - time.monotonic()

    def _arm_keeper(self) -> None:
        self._keeper_timer = asyncio.get_running_loop().call_later(max(0.0, self.keeper_delay()), self._start_keeper)

    def _start_keeper(self) -> None:
        if not self.done.is_set():
            self.keeper = asyncio.create_task(self.keep_lease())

    async def run(self, settled: Settled | None = None) -> None:
        """The whole attempt: wait for the due time, execute, report, release the lease (or leave it), give the
        run back if handed back. `settled` is called once it has started, or at its end if it never starts (the
        agent starts a staged herd as a stream, waiting.py)."""
        cmd, spec = self.cmd, self.cmd.spec
        self._settled = settled or _nothing
        if self.lease.token:  # an unclaimed one's keeper is armed once its claim is written (_claim_late)
            self._arm_keeper()
        try:
            if self.phase is P.STAGED:  # fenced or handed back, it ends before it starts: no need to wait
                self._apply(E.LAUNCH)
                await sleep_until(self.ctx, cmd.due_at)
                await self.before_spawn(self)
            with messaging_span(_tracer, "process", s.assign_subject(cmd.agent), parent=self.parent,
                                run_id=cmd.run_id, job=cmd.job, attempt=cmd.attempt) as span:
                outcome = await self._execute(spec.command)
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
            self._rewake.set()
            if self._keeper_timer is not None:
                self._keeper_timer.cancel()
            if self.keeper is not None:
                await self.keeper
            await self._settle_start_report()
            await self._clear_room()
            # After a success no attempt follows, so the lease may simply expire: one write saved per run.
            if self.phase not in (P.FENCED, P.SUCCEEDED):
                await faults.slow_point("agent.before_release")  # tests: a slow release strands nothing
                await self._release()
            try:
                if self.phase is P.HANDED_BACK:  # and not fenced since
                    await self._give_back(self.why or "handed back")
            finally:
                self._apply(E.END)

    async def _release(self) -> None:
        """Give the claim up: the run can be judged (and run again) without waiting for its TTL.

        A claim of its own lapses within the run lease TTL if this fails. A bound claim lives as long as the
        agent's lease: left behind by an attempt that ended without its report landing (the storage not
        answering), it would keep the run `running` for the claim's long TTL. So its release is tried again until
        it lands, the agent stops, or the agent's lease is no longer the one the claim is bound to (then the
        tracker judges the claim dead anyway)."""
        if not self.lease.token:  # never claimed: nothing stored to give up
            return
        while True:
            try:
                await self.ctx.leases.release(self.lease)
                return
            except JetcronError:
                if not self.bound or self.ctx.stop.is_set() or self.deps.agent_nonce() != self.bound:
                    return
            await asyncio.sleep(RELEASE_RETRY)

    async def _clear_room(self) -> None:
        """The child has ended (or never started): its scratch goes, and its uid back to the pool (after its
        report: a large scratch takes a while to remove)."""
        room, self.room = self.room, None
        if room is None or self.deps.scratches is None:
            return
        gone = False
        with contextlib.suppress(OSError):
            gone = await self.deps.scratches.close_soon(room)
        if not gone:
            self.ctx.log.warning("scratch directory not removed; the agent's next start removes it",
                                 run_id=self.cmd.run_id, attempt=self.cmd.attempt, path=str(room.path))

    def _not_started(self) -> Outcome:
        return Outcome("killed", None, "fenced before start" if self.phase is P.FENCED else "handed back before start")

    async def _execute(self, argv: list[str]) -> Outcome:
        if self.phase is not P.STARTING:
            return self._not_started()
        if self.ctx.settings.agent_sim:
            return await self._simulate()
        spec, settings, env = self.cmd.spec, self.ctx.settings, self.env()
        refused = root_refusal(spec.run_as_root, settings.agent_allow_root, self.cmd.root_allowed, spec.tenant)
        if refused:
            return Outcome("start_failed", None, refused)
        if spec.secrets:
            values, missing = await resolve_secrets(self.ctx, spec)
            if missing:
                return Outcome("start_failed", None, missing)
            env.update(values)
        if settings.nats_creds:  # auth on: the run gets its own credential, never the agent's
            creds, why = await run_credential(self.ctx.rpc, self.cmd)
            if why:
                self.ctx.log.warning("run starts without a NATS credential", run_id=self.cmd.run_id, reason=why)
            env.update(creds)
        if self.phase is not P.STARTING:  # fenced or handed back while its secrets were read: spawn nothing
            return self._not_started()
        launch = plan(spec, argv, env, self._host_facts(),
                      container=container_name(self.cmd.run_id, self.cmd.attempt), gpus=self.cmd.gpu_indices)
        if isinstance(launch, str):
            return Outcome("start_failed", None, launch)
        deps, container, on_kill = self.deps, launch.container, None
        limits = RunLimits(deps.setup.limits, f"{self.cmd.run_id}-{self.cmd.attempt}",
                           memory_mb=spec.resources.memory_mb, max_pids=settings.agent_max_pids) \
            if launch.agent_limits else None
        if launch.env is not None:  # a container's CLI: the agent's environment and the variables it passes on
            env = launch.env
        if container is not None and deps.setup.runtime is not None:
            on_kill = partial(containers.remove, deps.setup.runtime, container)
            deps.strays.add_container(container)
        spare = deps.spares.take() if launch.spare and deps.spares is not None else None
        switch, view, scratch = launch.user, None, None
        if launch.scratch and deps.scratches is not None:
            try:
                self.room = await deps.scratches.open_soon(spec.run_as_root,
                                                           spare.hand_over() if spare is not None else None)
            except NoRoom as exc:
                if spare is not None:
                    await spare.discard()
                return Outcome("start_failed", None, str(exc))
            view, scratch = self.room.view, str(self.room.path)
            switch = view.user
            env.update(view.env(scratch, spec.env))
        self.execution = Execution(launch.argv, env, limits=limits, timeout=spec.timeout_seconds, user=switch,
                                   kill_grace=settings.kill_grace, on_output=self.output, on_kill=on_kill,
                                   spare=spare, view=view, scratch=scratch, launcher=deps.setup.launcher)
        try:
            failed = await self.execution.start()
            if failed is not None:
                return failed
            if self.phase is not P.STARTING:  # fenced or handed back while it spawned, before it could be stopped
                self._end_child(self.why or str(self.phase), grace=self.phase is P.HANDED_BACK or self.graceful,
                                seconds=self.grace_seconds)
            deps.strays.add(self.execution.pid)
            try:
                await self._started(self.execution.pid)
                return await self.execution.wait()
            finally:
                deps.strays.remove(self.execution.pid)
        finally:
            if container is not None and deps.setup.runtime is not None:
                await containers.remove(deps.setup.runtime, container)
                deps.strays.remove_container(container)

    async def _simulate(self) -> Outcome:
        """Run nothing for the drawn time and exit with the drawn code (deps.sim); stopped as a child is."""
        seconds, code = self.deps.sim.draw(self.cmd.run_id, self.cmd.attempt)
        limit = self.cmd.spec.timeout_seconds
        if seconds > 0:
            self._sim_end = asyncio.Event()
        await self._started(0)
        if self._sim_end is None:
            # Yield before reporting: the rest of a herd due at this instant starts before this one's report
            # (encode, publish) takes its turn on the loop, as a real child's exit would come later anyway.
            await asyncio.sleep(0)
        else:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._sim_end.wait(), min(seconds, limit) if limit else seconds)
            if self._sim_end.is_set():
                return Outcome("killed", None, self.why or "stopped")
            if limit and seconds > limit:
                return Outcome("timed_out", None, f"timed out after {limit}s")
        return Outcome("succeeded", 0) if code == 0 else Outcome("failed", code, f"exit code {code}")

    def _host_facts(self) -> HostFacts:
        user, scratches, spares = self.deps.user, self.deps.scratches, self.deps.spares
        switch = (user.uid, user.gid) if user is not None and user.uid is not None and user.gid is not None else None
        return HostFacts(agent_id=self.cmd.agent, runtime=self.deps.setup.runtime,
                         max_pids=self.ctx.settings.agent_max_pids, user=switch,
                         scratch_private_tmp=None if scratches is None
                         else scratches.view(self.cmd.spec.run_as_root).private_tmp,
                         spare_private_tmp=None if spares is None else spares.private_tmp,
                         cli_env=containers.cli_env() if self.deps.setup.runtime is not None else {})

    async def _started(self, pid: int) -> None:
        if self.phase is P.STARTING:
            self._apply(E.SPAWN)
        self.started_at = now = self.ctx.clock.now()
        self.pid = pid
        metrics.RUN_WAIT.observe(max(0.0, (now - self.cmd.due_at).total_seconds()))
        self.start_report = asyncio.create_task(self._report_start_later())
        # Started: the next of a herd may start now. Its reports wait for room in the window instead; gating
        # the starts on the reports' acks made a herd start only as fast as the tracker took reports in.
        self._settled()

    async def _report_start_later(self) -> None:
        await asyncio.sleep(START_REPORT_DELAY)
        self._start_publishing = True  # from here the finish waits for it: the claim and the start land first
        if not self.lease.token and not await self._claim_late():
            return
        assert self.started_at is not None
        async with self.window:
            await self.ctx.publisher.publish(s.event_subject("started", self.cmd.agent), RunStarted(
                run_id=self.cmd.run_id, attempt=self.cmd.attempt, token=self.first_token, agent=self.cmd.agent,
                pid=self.pid, at=self.started_at), msg_id=s.msg_id(self.cmd.run_id, self.cmd.attempt, "started"),
                ttl=self.ttl)

    async def _claim_late(self) -> bool:
        """Write the claim of an attempt that started without one (jetcron.core.lifecycle.leases.claims_late), before
        its start report says it runs; an older attempt's claim is taken over as at any take. Whether it holds it: one
        held for this attempt elsewhere or for a newer one, or not written in time
        (jetcron.core.lifecycle.leases.claim_by) (the storage not answering; the tracker judges an attempt never claimed
        by the assignment stall), fences the attempt."""
        deadline = leases.claim_by(self.leased_at, self.ctx.settings.assign_stall)
        while self.phase is not P.FENCED:
            sent = time.monotonic()
            if sent >= deadline:
                self.fence("claim not written in time (the storage did not answer)")
                return False
            try:
                lease = await asyncio.wait_for(self.ctx.leases.take(
                    self.lease.key, self.lease.value.holder, self.lease_ttl, attempt=self.cmd.attempt,
                    now=self.ctx.clock.now(), bound=self.bound), timeout=deadline - sent)
            except (JetcronError, TimeoutError):
                await asyncio.sleep(min(RELEASE_RETRY, max(0.0, deadline - time.monotonic())))
                continue
            if lease is None:
                self.fence("claim held for another or a newer attempt (re-dispatched or cancelled)")
                return False
            self.lease, self.leased_at, self.granted = lease, sent, self.lease_ttl
            if not self.done.is_set():
                self._arm_keeper()
            return True
        return False

    async def _settle_start_report(self) -> None:
        """Before the finish: drop a start report not yet sent, or let one in flight land first (order)."""
        task = self.start_report
        if task is None:
            return
        if not self._start_publishing:
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError, JetcronError):
            await task

    async def _report(self, outcome: Outcome) -> None:
        await self._settle_start_report()
        kind = "cancelled" if outcome.outcome == "killed" else outcome.outcome
        finished = RunFinished(
            run_id=self.cmd.run_id, attempt=self.cmd.attempt, token=self.first_token, agent=self.cmd.agent,
            outcome=kind, exit_code=outcome.exit_code, reason=outcome.reason, at=self.ctx.clock.now(),
            started_at=self.started_at, pid=self.pid)
        async with self.window:
            if self.sent:
                # The end marker lets `runs logs --follow` stop; a run with no output has nothing to follow.
                await self.ctx.publisher.publish(s.logs_subject(self.cmd.run_id, self.cmd.agent), b"",
                                                 headers={s.HDR_LOG_END: "1"},
                                                 msg_id=s.msg_id(self.cmd.run_id, self.cmd.attempt, "logend"),
                                                 ttl=self.ttl)
            if not await self._hand_in(finished):
                await self.ctx.publisher.publish(s.event_subject("finished", self.cmd.agent), finished,
                                                 msg_id=s.msg_id(self.cmd.run_id, self.cmd.attempt, "finished"),
                                                 ttl=self.ttl)
        if kind == "succeeded" and self.phase is P.REPORTING:  # not fenced while it reported
            self._apply(E.SUCCEED)

    async def _hand_in(self, finished: RunFinished) -> bool:
        """Whether a tracker took the finish report directly, its run record written (jetcron.bus.direct). The finish
        carries its start, so it needs no start report ahead of it (one still unread on the stream is then
        dropped as late). One to a request only while few reports are in flight here (jetcron.core.lifecycle.handoff
        .report_directly); batched (`agent_report_batch` > 1), always (reports.FinishBatches)."""
        finishes = self.deps.finishes
        if finishes is None or not report_directly(self.window.queued, finishes.most):
            return False
        return await finishes.hand(finished)

    async def hand_back(self, why: str) -> None:
        """Drain: stop the child; the run is given back once the child has ended and the lease is released
        (run()). Refused, doing nothing, once the child has ended and reported (the report says how it ended),
        once fenced (the lease is not ours to give back), or when handed back already."""
        if not allows(self.phase, E.HAND_BACK):
            return
        self._apply(E.HAND_BACK)
        self.why = why
        self._end_child(why, grace=True)
        await self._handing_back(why)

    async def _handing_back(self, why: str) -> None:
        """Just handed back (gang members: give the whole gang back now)."""

    async def _give_back(self, why: str) -> None:
        # Sent only after the lease is released: the tracker re-dispatches at once, and the next agent's
        # acquire must find the lease free, or it skips the assignment and the run waits for a stall timeout.
        subject = s.event_subject("handed_back", self.cmd.agent)
        with messaging_span(_tracer, "publish", subject, parent=self.parent, run_id=self.cmd.run_id,
                            job=self.cmd.job, attempt=self.cmd.attempt):
            await self.ctx.publisher.publish(subject, RunHandedBack(
                run_id=self.cmd.run_id, attempt=self.cmd.attempt, token=self.first_token, agent=self.cmd.agent,
                reason=why, at=self.ctx.clock.now(), started=self.execution is not None or self.started_at is not None),
                msg_id=s.msg_id(self.cmd.run_id, self.cmd.attempt, "handback"), ttl=self.ttl)

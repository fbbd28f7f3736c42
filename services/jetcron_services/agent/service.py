"""The agent: advertise this host, take assignments under a run lease, execute, report; drain on SIGTERM."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import sys
import time
from functools import partial
from pathlib import Path

from jetcron import faults
from jetcron.bus.direct import Direct, Taker
from jetcron.bus.lease import Stop
from jetcron.bus.ports import Message
from jetcron.bus.topology import agent_durable
from jetcron.core.errors import JetcronError
from jetcron.core.host.sim import SimExecution
from jetcron.core.lifecycle.ended import Ended
from jetcron.core.lifecycle.handoff import report_requests
from jetcron.wire import subjects as s
from jetcron.wire.codec import decode
from jetcron.wire.messages import CancelRun
from jetcron_services.agent.attempt import Attempt
from jetcron_services.agent.attempt_deps import AttemptDeps
from jetcron_services.agent.heartbeat import Heartbeat, shown_job_user
from jetcron_services.agent.held import HeldAttempts
from jetcron_services.agent.host.confine import JobUser, agent_job_user
from jetcron_services.agent.host.container import remove_leftovers
from jetcron_services.agent.host.offer import HostSetup, checked_agent_id, parse_labels
from jetcron_services.agent.host.scratch import Scratches
from jetcron_services.agent.host.spares import SparePool
from jetcron_services.agent.host.strays import StrayGuard
from jetcron_services.agent.intake import Intake
from jetcron_services.agent.liveness import AgentLiveness
from jetcron_services.agent.ports import AgentPorts
from jetcron_services.agent.reports import FinishBatches, ReportWindow
from jetcron_services.agent.waiting import Settled, Waiting
from jetcron_services.runtime import Context, background, ends_within, stopping_without_nats

STOP_WRITE_TIMEOUT = 2.0
"""Seconds the stop's own writes (the draining heartbeat, the entry's removal) wait on the server."""
STOP_TASKS_TIMEOUT = 5.0
"""Seconds the stop waits for the heartbeat and the assignments' pull to end."""


class Agent:
    """Takes assignments (intake.py) into its slots, holds their attempts (held.py) and starts each as it comes due
    (waiting.py); stops them when cancelled, when its own lease is lost (liveness.py) or as it drains; its heartbeat
    advertises it (heartbeat.py)."""

    def __init__(self, ctx: AgentPorts, agent_id: str, setup: HostSetup, scratches: Scratches | None = None,
                 sim: SimExecution | None = None) -> None:
        self.ctx = ctx
        self.scratches = scratches
        """Each attempt's scratch, uid and private /tmp (scratch.py); None in a simulation, which runs nothing."""
        self.agent_id = agent_id
        self.setup = setup
        self.held = HeldAttempts()
        # At most agent_slots attempts (a gang's member counts one, as placement counts it) run at once; more
        # assignments wait in the stream (back-pressure, not a thousand processes when placement packs a storm
        # of tiny runs onto one host).
        self.slots = asyncio.Semaphore(ctx.settings.agent_slots)
        self.reports = ReportWindow(ctx.settings.agent_report_window, ctx.settings.agent_report_hold)
        """Reports in flight from all attempts, bounded, and held while a herd starts (reports.py)."""
        self.waiting: Waiting[Attempt] = Waiting(ctx.clock, self._launch, ctx.settings.agent_start_burst,
                                                 self.reports)
        """Attempts assigned ahead of their due time (a staged herd), holding their slots but no tasks yet."""
        self.liveness = AgentLiveness(ctx, agent_id, lost=self._lease_lost, stops=self._stops)
        """This agent's own lease, which its run claims (a gang member's aside) are bound to."""
        self.draining = False
        self._tasks: set[asyncio.Task[None]] = set()
        self.job_user = agent_job_user(ctx.settings.agent_job_user)
        """Who jobs run as (looked up once: an unknown user stops the agent at start, not each run)."""
        self.strays = StrayGuard(Path(ctx.settings.data_dir) / f"agent-{agent_id}.pgids", agent_id)
        # Spares are kept by root agents (and by agents that switch no user): an agent that is not root spawns every
        # run through the launcher, whose own steps drop the capabilities it holds.
        spares = ctx.settings.agent_spare and not ctx.settings.agent_sim and SparePool.usable(
            setup.limits, setup.launcher) and (os.geteuid() == 0 or self.job_user.uid is None)
        self.spares = SparePool(setup.limits, max_pids=ctx.settings.agent_max_pids, strays=self.strays,
                                agent_id=agent_id, scratches=scratches, launcher=setup.launcher) if spares else None
        self.deps = AttemptDeps(strays=self.strays, setup=setup, reports=self.reports, user=self.job_user,
                                spares=self.spares, scratches=scratches, sim=sim or SimExecution(),
                                agent_nonce=lambda: self.liveness.nonce,
                                finishes=FinishBatches(
                                    Direct(ctx.rpc, "report", ctx.settings.handoff_timeout), agent_id,
                                    most=ctx.settings.agent_report_batch,
                                    flying=report_requests(ctx.settings.agent_report_batch))
                                if ctx.settings.report_by == "direct" else None)
        self.intake = Intake(ctx, agent_id, self, held=self.held, slots=self.slots, waiting=self.waiting,
                             liveness=self.liveness, deps=self.deps, job_user=self.job_user)
        self.handoffs = Taker(self.intake.handed, fault="agent.handoff_answer")
        """Assignments handed over directly (jetcron.bus.direct), each taken in a task of its own."""
        self.heartbeat = Heartbeat(ctx, agent_id, setup, held=self.held, reports=self.reports, job_user=self.job_user,
                                   scratches=scratches, draining=lambda: self.draining)

    # What the agent holds, by the names its tests and benchmarks read.
    @property
    def attempts(self) -> dict[str, Attempt]:
        return self.held.attempts

    @property
    def live(self) -> dict[str, list[Attempt]]:
        return self.held.live

    @property
    def ended(self) -> Ended:
        return self.held.ended

    @property
    def _takes(self) -> dict[str, asyncio.Event]:
        return self.intake.takes

    async def take(self, msg: Message) -> None:
        """Consumer handler (Intake.take): take the assignment in a slot, start its attempt, ack."""
        await self.intake.take(msg)

    async def start(self, attempt: Attempt) -> None:
        """Start an attempt whose lease this agent has just taken, in the slot taken for it (`take`): every
        attempt, a gang's member too, starts here.

        It counts as this agent's at once (heartbeat, a second delivery), then waits for its due time in the
        waiting index with no task (`may_stage`: its first lease covers the wait) or is launched now. While the
        agent drains it is handed back at once instead, and ends without starting. Whatever way it ends, its
        slot is given back then (`_run`)."""
        self.held.hold(attempt)
        attempt.before_spawn = self.clear_for
        if self.draining:
            with contextlib.suppress(JetcronError):
                await attempt.hand_back("agent draining")
            self._launch(attempt)
        elif attempt.may_stage and attempt.cmd.due_at > self.ctx.clock.now():
            self.waiting.add(attempt.cmd.run_id, attempt.cmd.due_at, attempt)  # staged: no tasks until it is due
        else:
            self._launch(attempt)

    async def clear_for(self, attempt: Attempt) -> None:
        """Before an attempt spawns its child: wait until no attempt it must not overlap is still being stopped here,
        an older attempt of the same run or one given the same GPU devices (cancelled or preempted with a grace
        period, in which it may save the checkpoint the next attempt loads). Those end within their grace."""
        while (blocking := self.held.stopping_near(attempt)) is not None:
            self.ctx.log.info("attempt waits for a stopping one to end", run_id=attempt.cmd.run_id,
                              attempt=attempt.cmd.attempt, waits_for=blocking.cmd.run_id)
            await blocking.done.wait()

    def _launch(self, attempt: Attempt, settled: Settled | None = None) -> None:
        """Run an attempt whose time has come (or that ends before it: cancelled or fenced while waiting).

        `settled` is called once it has started, or at its end (the staged herd's burst, waiting.py)."""
        if not attempt.claim.covers(time.monotonic()):
            # Paused or starved past its first lease while it waited: the server may have expired it already.
            attempt.fence("lease ran out while waiting for the due time (paused or cut off)")
        self._tasks.add(task := asyncio.create_task(self._run(attempt, settled)))
        task.add_done_callback(self._tasks.discard)

    def stop_attempt(self, attempt: Attempt, why: str, *, grace: bool = False,
                     grace_seconds: float | None = None) -> None:
        """Fence an attempt of this agent; one still waiting for its due time ends now and frees its slot."""
        attempt.fence(why, grace=grace, grace_seconds=grace_seconds)
        if self.waiting.take_back(attempt.cmd.run_id) is not None:
            self._launch(attempt)

    async def _run(self, attempt: Attempt, settled: Settled | None) -> None:
        try:
            await attempt.run(settled)
        except JetcronError as exc:
            self.ctx.log.warning("attempt failed to report", run_id=attempt.cmd.run_id, error=str(exc))
        except Exception:
            self.ctx.log.exception("attempt crashed", run_id=attempt.cmd.run_id)
        finally:
            self.slots.release()
            self.held.let_go(attempt)

    async def on_control(self, msg: Message) -> None:
        with contextlib.suppress(Exception):
            faults.point("agent.on_control")  # tests: a control message lost on its way (fail drops it)
            cmd = decode(msg.data, CancelRun)
            self._cancel(cmd.run_id, cmd.attempt, cmd.reason, cmd.grace_seconds)

    def _cancel(self, run_id: str, attempt_no: int, reason: str, grace_seconds: float | None) -> None:
        attempt = self.held.attempts.get(run_id)
        if attempt is not None and attempt.cmd.attempt == attempt_no:
            # The record is cancelled (or preempted: a new attempt) and the lease revoked: stopped as a timeout
            # stops it (with a preemption's own grace), not reported
            self.stop_attempt(attempt, reason, grace=True, grace_seconds=grace_seconds)

    def _stops(self, stops: tuple[Stop, ...]) -> None:
        """A stop notice on the agent lease: the durable path of a cancel whose control message may be lost."""
        for stop in stops:
            self._cancel(stop.run_id, stop.attempt, stop.reason, stop.grace_seconds)

    def _lease_lost(self, nonce: str, why: str) -> None:
        """The agent lease of `nonce` is lost: every attempt bound to it stops now (waiting ones too); the server
        may have expired it, and the tracker re-dispatches their runs."""
        for attempt in self.held.bound_to(nonce):
            self.stop_attempt(attempt, why)

    async def drain(self) -> None:
        """Take nothing new; let running attempts finish within the grace period, then hand them back."""
        self.draining = True
        # Say so first: placement must not hand what we give back (or anything new) to us again. Bounded: a
        # frozen server answers nothing, and the entry expires by itself.
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.heartbeat.beat(), timeout=STOP_WRITE_TIMEOUT)
        # Attempts still waiting for their due time have not started: give them back now, so that another agent
        # can start them on time, rather than after the grace period.
        waiting = self.waiting.take_all()
        if waiting:
            self.ctx.log.info("draining: giving back attempts not yet due", attempts=len(waiting))
        for attempt in waiting:
            with contextlib.suppress(JetcronError):
                await attempt.hand_back("agent draining")
            self._launch(attempt)  # ends without starting
        deadline = asyncio.get_running_loop().time() + self.ctx.settings.drain_grace
        while self.held.attempts and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.1)
        # Those handed back already, fenced, or reporting how they ended refuse it (attempt.hand_back).
        for attempt in list(self.held.attempts.values()):
            with contextlib.suppress(JetcronError):
                await attempt.hand_back("agent draining")
        while self.held.attempts:
            await asyncio.sleep(0.05)


def cannot_switch_note(user: JobUser) -> str:
    """What an agent that cannot switch users says once at its start."""
    groups = sorted(set(os.getgroups()) - {os.getegid()})
    held = f" and its supplementary groups ({', '.join(map(str, groups))})" if groups else ""
    return (f"jobs run as this agent's own user {user.name}{held}: it cannot switch users ({user.cannot_switch}); "
            "they can read what it reads, its credential included, and reach each other. Run the agent as root, or "
            "give it CAP_SETUID, CAP_SETGID, CAP_CHOWN, CAP_DAC_OVERRIDE and CAP_KILL as ambient capabilities")


async def main(ctx: Context) -> None:
    agent_id = checked_agent_id(ctx.settings.agent_id or socket.gethostname().split(".")[0])
    parse_labels(ctx.settings.agent_labels)  # a bad label refuses the start (Misconfigured), not a heartbeat
    # Probed once: `docker info` and the cgroup checks are too slow for every heartbeat.
    # A simulated agent spawns nothing: no launcher to look for (and run once) at its start.
    setup = await asyncio.to_thread(HostSetup.probe, agent_id, ctx.settings.data_dir,
                                    ctx.settings.agent_launcher and not ctx.settings.agent_sim)
    scratches = None
    user = agent_job_user(ctx.settings.agent_job_user)
    if not ctx.settings.agent_sim:  # a simulation runs nothing: no scratch, no uid
        if user.cannot_switch is not None:
            ctx.log.warning(cannot_switch_note(user))
        scratches, notes = await asyncio.to_thread(Scratches.setup, ctx.settings, agent_id, user, setup.launcher)
        for note in notes:
            ctx.log.warning(note)
    agent = Agent(ctx, agent_id, setup, scratches, sim=ctx.settings.agent_sim_execution)
    strays: list[int | str] = [*agent.strays.kill_leftovers(), *setup.limits.sweep()]
    if setup.runtime is not None:
        strays += await asyncio.to_thread(remove_leftovers, setup.runtime, agent_id)
    if scratches is not None:  # once its groups are dead: nothing writes into its scratches any more
        removed, killed = await asyncio.to_thread(scratches.clear_leftovers)
        strays += killed
        if removed:
            ctx.log.warning("removed scratch directories from an earlier life", count=len(removed))
    if strays:
        ctx.log.warning("killed strays from an earlier life", strays=strays)
    cgroups = sorted({str(d) for d in (setup.limits.memory, setup.limits.pids) if d is not None})
    await agent.strays.start_reaper(sys.executable, setup.runtime, cgroups)
    ctx.busy = lambda: bool(agent.held.attempts)
    try:
        await _serve(ctx, agent, setup, scratches)
    finally:
        # Also when a stop is cut short (cancelled): the spare and the reaper are this process's children, and
        # left to the interpreter's exit they would be closed on a closed loop.
        if agent.spares is not None:
            await agent.spares.close()
        await agent.strays.close()
        setup.limits.close()


async def _serve(ctx: Context, agent: Agent, setup: HostSetup, scratches: Scratches | None) -> None:
    """Take assignments until asked to stop, then drain."""
    if agent.spares is not None:
        agent.spares.refill()
    liveness = agent.liveness
    if not await liveness.take():  # held before the first assignment is taken, kept until the drain is over
        return
    kept = background(ctx, liveness.keep())
    remake = partial(ctx.consumers.ensure, s.STREAM_ASSIGN, agent_durable(agent.agent_id))
    durable = await remake()
    control = await ctx.rpc.serve(s.control_subject(agent.agent_id), agent.on_control)
    # Served before the first heartbeat, which is what makes placement send anything here.
    handoff = await ctx.rpc.serve(s.handoff_subject(agent.agent_id), agent.handoffs.on_request, flush=True)
    consume_stop = asyncio.Event()
    if setup.gpus[0]:
        await agent.heartbeat.gpu_health.check()  # the first heartbeat already carries a result
    tasks = [background(ctx, agent.heartbeat.run()), background(ctx, agent.heartbeat.gpu_health.loop()),
             background(ctx, agent.waiting.run(ctx.stop)),
             background(ctx, ctx.consumers.consume(s.STREAM_ASSIGN, durable, agent.take, stop=consume_stop,
                                                   batch=64, concurrency=ctx.settings.agent_slots,
                                                   remake=remake))]
    ctx.ready.set()
    ctx.log.info("agent ready", agent=agent.agent_id, limits=setup.limits.mechanism,
                 capabilities=setup.capabilities, scratch=str(scratches.dir) if scratches else None,
                 private_tmp=bool(scratches and scratches.private_tmp),
                 job_uids=len(scratches.uids) if scratches and scratches.uids else 0,
                 job_user=shown_job_user(agent.job_user, scratches),
                 launcher=setup.launcher is not None)
    await ctx.stop.wait()
    consume_stop.set()
    await handoff.unsubscribe()  # refused while draining anyway: placement's stream path is the one for the rest
    await agent.drain()
    liveness.finished.set()
    tasks.append(kept)
    await control.unsubscribe()
    # A heartbeat or a pull waiting on a server that does not answer would hold the stop for the JetStream
    # timeout: cut short once the connection is lost (an assignment not acknowledged yet is redelivered).
    if await ends_within(ctx, set(tasks), STOP_TASKS_TIMEOUT) != "ended":
        stopping_without_nats(ctx, "this agent's entry expires by itself")
        for task in tasks:
            task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    if ctx.rpc.connected:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(liveness.release(), timeout=STOP_WRITE_TIMEOUT)
    if ctx.rpc.connected:
        with contextlib.suppress(JetcronError, TimeoutError):
            await asyncio.wait_for(ctx.agents.delete(agent.agent_id), timeout=STOP_WRITE_TIMEOUT)

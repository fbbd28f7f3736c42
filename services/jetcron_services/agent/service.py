"""The agent: advertise this host, take assignments under a run lease, execute, report; drain on SIGTERM."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import sys
import time
from collections.abc import AsyncIterator
from functools import partial
from pathlib import Path
from typing import TypeVar

import msgspec

from jetcron import faults
from jetcron.bus.consume import Drop, Retry, touch
from jetcron.bus.direct import Direct, Taker
from jetcron.bus.lease import Stop, unclaimed
from jetcron.bus.ports import Message
from jetcron.bus.topology import agent_durable
from jetcron.core.errors import JetcronError
from jetcron.core.host.sim import SimExecution
from jetcron.core.lifecycle import leases
from jetcron.core.lifecycle.ended import Ended
from jetcron.core.lifecycle.handoff import report_requests
from jetcron.core.placing.agents_index import Used
from jetcron.telemetry import metrics
from jetcron.telemetry.tracing import continue_trace
from jetcron.wire import subjects as s
from jetcron.wire.codec import decode
from jetcron.wire.messages import HANDOFF_REFUSED, HANDOFF_TAKEN, AssignRun, CancelRun
from jetcron_services.agent import gang
from jetcron_services.agent.attempt import Attempt, AttemptDeps
from jetcron_services.agent.host.confine import JobUser, agent_job_user, job_env
from jetcron_services.agent.host.container import remove_leftovers
from jetcron_services.agent.host.gpu_health import GpuHealth
from jetcron_services.agent.host.offer import HostSetup, checked_agent_id, describe, parse_labels
from jetcron_services.agent.host.scratch import Scratches
from jetcron_services.agent.host.spares import SparePool
from jetcron_services.agent.host.strays import StrayGuard
from jetcron_services.agent.liveness import AgentLiveness
from jetcron_services.agent.reports import FinishBatches, ReportWindow
from jetcron_services.agent.waiting import Settled, Waiting
from jetcron_services.runtime import Context, background, ends_within, stopping_without_nats

STOP_WRITE_TIMEOUT = 2.0
"""Seconds the stop's own writes (the draining heartbeat, the entry's removal) wait on the server."""
STOP_TASKS_TIMEOUT = 5.0
"""Seconds the stop waits for the heartbeat and the assignments' pull to end."""
LEASE_WRITES = 64
"""Lease acquisitions in flight: the leader and shard leases share their bucket's write queue, and a thousand
run leases ahead of a leader's renewal (a herd's assignments, fsync on) made it time out (placement and the
trigger lost their leases at the instant); the same bound as placement's assignment writes, halved."""


class Agent:
    def __init__(self, ctx: Context, agent_id: str, setup: HostSetup, scratches: Scratches | None = None,
                 sim: SimExecution | None = None) -> None:
        self.ctx = ctx
        self.scratches = scratches
        """Each attempt's scratch, uid and private /tmp (scratch.py); None in a simulation, which runs nothing."""
        self.agent_id = agent_id
        self.setup = setup
        self.gpu_health = GpuHealth(ctx, setup.gpus[0])
        self.attempts: dict[str, Attempt] = {}
        self.live: dict[str, list[Attempt]] = {}
        """Every attempt not ended yet by run id, a superseded one too (`attempts` keeps the newest of a run)."""
        self.on_devices: dict[int, list[Attempt]] = {}
        """The attempts not ended yet that were given each GPU device."""
        self.ended = Ended()
        """Attempts that ended here lately: an assignment redelivered after one (its ack lost) is not run again."""
        # At most agent_slots attempts (a gang's member counts one, as placement counts it) run at once; more
        # assignments wait in the stream (back-pressure, not a thousand processes when placement packs a storm
        # of tiny runs onto one host).
        self.slots = asyncio.Semaphore(ctx.settings.agent_slots)
        self.used = Used()
        """What the attempts in `attempts` take, kept as they come and go: summing them at every heartbeat
        walked a staged herd of tens of thousands."""
        self.reports = ReportWindow(ctx.settings.agent_report_window, ctx.settings.agent_report_hold)
        """Reports in flight from all attempts, bounded, and held while a herd starts (reports.py)."""
        self.waiting: Waiting[Attempt] = Waiting(ctx.clock, self._launch, ctx.settings.agent_start_burst,
                                                 self.reports)
        """Attempts assigned ahead of their due time (a staged herd), holding their slots but no tasks yet."""
        self.lease_writes = asyncio.Semaphore(LEASE_WRITES)
        self.liveness = AgentLiveness(ctx, agent_id, lost=self._lease_lost, stops=self._stops)
        """This agent's own lease, which its run claims (a gang member's aside) are bound to."""
        self.draining = False
        self._tasks: set[asyncio.Task[None]] = set()
        self.handoffs = Taker(self._handed, fault="agent.handoff_answer")
        """Assignments handed over directly (jetcron.bus.direct), each taken in a task of its own."""
        self._takes: dict[str, asyncio.Event] = {}
        """Runs whose assignment is being taken now, set when it is done (`_taking`)."""
        self.started_at = ctx.clock.now()
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

    def _env(self, cmd: AssignRun, token: int) -> dict[str, str]:
        run_vars = {
            "JETCRON_RUN_ID": cmd.run_id, "JETCRON_ATTEMPT": str(cmd.attempt),
            "JETCRON_IDEMPOTENCY_KEY": f"run:{cmd.run_id}", "JETCRON_SCHEDULED_AT": cmd.scheduled_at.isoformat(),
            "JETCRON_FENCING_TOKEN": str(token), "JETCRON_JOB": cmd.job, "JETCRON_AGENT_ID": self.agent_id,
            "JETCRON_NATS_URL": self.ctx.settings.nats_url, "JETCRON_TENANT": cmd.spec.tenant,
        }
        if cmd.gpu_indices:
            run_vars["CUDA_VISIBLE_DEVICES"] = ",".join(str(i) for i in cmd.gpu_indices)
        if cmd.gang:
            run_vars.update(gang.gang_env(cmd))
        home = "/" if cmd.spec.run_as_root else self.job_user.home
        return job_env(path=self.ctx.settings.agent_job_path, home=home, job_env=cmd.spec.env, run_vars=run_vars)

    async def take(self, msg: Message) -> None:
        """Consumer handler: wait for a slot, take the lease (the run lease, or a gang member's own), start the
        attempt in the background, ack."""
        cmd = _assignment(msg)
        async with self._taking(cmd.run_id):
            if self._known(cmd):
                return
            await self._slot(msg)
            await self._take(cmd, msg)

    async def _handed(self, msg: Message) -> bytes:
        """The direct hand-off (`handoffs`): take an assignment as `take` does, answered `taken` once its claim is
        stored, or it has started with its claim still to write (jetcron.core.lifecycle.leases.claims_late), or it is
        known here. Refused at once, not waited on, when no slot is free or the agent drains: placement then sends it to
        this agent's stream, which waits for a slot. Whatever else goes wrong (the agent lease not held, the storage) is
        refused too (jetcron.bus.direct.Taker)."""
        cmd = _assignment(msg)
        async with self._taking(cmd.run_id):
            if self._known(cmd):
                return HANDOFF_TAKEN
            if self.draining or self.slots.locked():
                return HANDOFF_REFUSED
            await self.slots.acquire()  # free: returns at once
            await self._take(cmd, msg, direct=True)
            return HANDOFF_TAKEN

    @contextlib.asynccontextmanager
    async def _taking(self, run_id: str) -> AsyncIterator[None]:
        """One assignment of a run taken at a time here: the same one may come twice at once, handed over
        directly and then (its answer late) by the stream, and two claims of one attempt would fence each
        other. The second waits for the first and then finds it known (`_known`)."""
        while (busy := self._takes.get(run_id)) is not None:
            await busy.wait()
        self._takes[run_id] = done = asyncio.Event()
        try:
            yield
        finally:
            del self._takes[run_id]
            done.set()

    def _known(self, cmd: AssignRun) -> bool:
        """Whether this assignment is one here already: running, or ended lately. An older attempt of the run
        still here is stopped (a re-dispatch onto this host) and the assignment is not known."""
        existing = self.attempts.get(cmd.run_id)
        if existing is not None:
            if existing.cmd.attempt >= cmd.attempt:
                return True  # duplicate delivery of a run we are already running
            self._stop(existing, f"superseded by attempt {cmd.attempt}")
            return False
        if self.ended.ran(cmd.run_id, cmd.attempt, time.monotonic()):
            # Every re-dispatch is a new attempt, so this is the same assignment again: its ack was lost.
            self.ctx.log.info("assignment skipped: this attempt already ran here", run_id=cmd.run_id,
                              attempt=cmd.attempt)
            return True
        return False

    async def _take(self, cmd: AssignRun, msg: Message, *, direct: bool = False) -> None:
        """In the slot taken for it: take the assignment's lease and start its attempt (or give the slot back).
        `direct`: handed over by placement's request, just after its assignment was written (not from the stream,
        where it may have waited for a slot for any time)."""
        if self.draining:  # stopped taking work while this one waited for a slot: leave it for the reconciler
            self.slots.release()
            raise Retry(1.0, "agent draining")
        try:
            attempt = await self._lease(cmd, msg, direct)
        except BaseException:
            self.slots.release()
            raise
        mine = self.attempts.get(cmd.run_id)
        if attempt is None or (mine is not None and mine.cmd.attempt >= cmd.attempt):
            # Held for this attempt elsewhere, or for a newer one (or a second delivery took it meanwhile): a
            # stale assignment; the run record decides. An older attempt of the run still here (ended, its lease
            # release still to come) is replaced: skipping this one left the run to the tracker's stall timeout.
            self.slots.release()
            self.ctx.log.info("assignment skipped: lease held elsewhere", run_id=cmd.run_id, attempt=cmd.attempt)
            return
        await self.start(attempt)

    async def _lease(self, cmd: AssignRun, msg: Message, direct: bool) -> Attempt | None:
        """Take the assignment's lease and make its attempt; None when the lease is held elsewhere. A run due now
        handed over directly is made with its claim still to take (Attempt._claim_late)."""
        settings, now = self.ctx.settings, self.ctx.clock.now()
        if cmd.gang:
            # A member's lease covers no wait: its keeper renews it from the start.
            key, granted = gang.lease_key(cmd, self.agent_id), settings.run_lease_ttl
            kind = gang.member_kind(cmd, self.agent_id)
            bound = ""
        else:
            key, kind = s.run_lease_key(cmd.run_id), Attempt
            bound = self.liveness.nonce
            if not bound:
                raise Retry(1.0, "agent lease not held")  # lost a moment ago: taken afresh within a second
            granted = leases.first_grant(settings.run_claim_ttl, cmd.due_at, now, queued=len(self.waiting),
                                         start_rate=settings.agent_start_rate)
            if leases.claims_late(direct=direct, token=cmd.token, due_at=cmd.due_at, now=now):
                return kind(self.ctx, self.deps, cmd, unclaimed(key, self.agent_id, cmd.attempt, bound),
                            partial(self._env, cmd, cmd.token), continue_trace(msg.headers), granted,
                            time.monotonic())
        async with self.lease_writes:
            asked_at = time.monotonic()
            # An older attempt may still hold it: the record moved on, so it is taken over (that holder's next
            # renewal fails and it stops).
            lease = await self.ctx.leases.take(key, self.agent_id, granted, attempt=cmd.attempt,
                                               now=self.ctx.clock.now(), bound=bound)
        if lease is None:
            return None
        # The attempt's spans continue the run's trace from the traceparent placement sent with the assignment.
        return kind(self.ctx, self.deps, cmd, lease, partial(self._env, cmd, cmd.token or lease.token),
                    continue_trace(msg.headers), granted, asked_at)

    async def start(self, attempt: Attempt) -> None:
        """Start an attempt whose lease this agent has just taken, in the slot taken for it (`take`): every
        attempt, a gang's member too, starts here.

        It counts as this agent's at once (heartbeat, a second delivery), then waits for its due time in the
        waiting index with no task (`may_stage`: its first lease covers the wait) or is launched now. While the
        agent drains it is handed back at once instead, and ends without starting. Whatever way it ends, its
        slot is given back then (`_run`)."""
        self._hold(attempt)
        self._live(attempt, True)
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
        while True:
            near = [*self.live.get(attempt.cmd.run_id, ()),
                    *(a for g in attempt.cmd.gpu_indices for a in self.on_devices.get(g, ()))]
            blocking = [a for a in near if a is not attempt and a.stopping]
            if not blocking:
                return
            self.ctx.log.info("attempt waits for a stopping one to end", run_id=attempt.cmd.run_id,
                              attempt=attempt.cmd.attempt, waits_for=blocking[0].cmd.run_id)
            await blocking[0].done.wait()

    def _live(self, attempt: Attempt, alive: bool) -> None:
        """Index an attempt as not ended yet (alive), or drop it: it has ended."""
        _index(self.live, attempt.cmd.run_id, attempt, alive)
        for g in attempt.cmd.gpu_indices:
            _index(self.on_devices, g, attempt, alive)

    def _hold(self, attempt: Attempt) -> None:
        """Count an attempt as this agent's (a superseded one of the same run is simply replaced)."""
        old = self.attempts.get(attempt.cmd.run_id)
        if old is not None:
            self.used = self.used.minus(old.cmd.spec.resources)
        self.attempts[attempt.cmd.run_id] = attempt
        self.used = self.used.plus(attempt.cmd.spec.resources)
        metrics.AGENT_RUNNING.set(len(self.attempts))

    def _launch(self, attempt: Attempt, settled: Settled | None = None) -> None:
        """Run an attempt whose time has come (or that ends before it: cancelled or fenced while waiting).

        `settled` is called once it has started, or at its end (the staged herd's burst, waiting.py)."""
        if not attempt.lease_covers(time.monotonic()):
            # Paused or starved past its first lease while it waited: the server may have expired it already.
            attempt.fence("lease ran out while waiting for the due time (paused or cut off)")
        self._tasks.add(task := asyncio.create_task(self._run(attempt, settled)))
        task.add_done_callback(self._tasks.discard)

    def _stop(self, attempt: Attempt, why: str, *, grace: bool = False, grace_seconds: float | None = None) -> None:
        """Fence an attempt of this agent; one still waiting for its due time ends now and frees its slot."""
        attempt.fence(why, grace=grace, grace_seconds=grace_seconds)
        if self.waiting.take_back(attempt.cmd.run_id) is not None:
            self._launch(attempt)

    async def _slot(self, msg: Message) -> None:
        """Wait for a free slot; meanwhile tell the server the assignment is being worked on (no redelivery)."""
        while True:
            try:
                await asyncio.wait_for(self.slots.acquire(), timeout=10)
                return
            except TimeoutError:
                await touch(msg)

    async def _run(self, attempt: Attempt, settled: Settled | None) -> None:
        try:
            await attempt.run(settled)
        except JetcronError as exc:
            self.ctx.log.warning("attempt failed to report", run_id=attempt.cmd.run_id, error=str(exc))
        except Exception:
            self.ctx.log.exception("attempt crashed", run_id=attempt.cmd.run_id)
        finally:
            self.slots.release()
            self._live(attempt, False)
            if self.attempts.get(attempt.cmd.run_id) is attempt:
                del self.attempts[attempt.cmd.run_id]
                self.used = self.used.minus(attempt.cmd.spec.resources)
            self.ended.add(attempt.cmd.run_id, attempt.cmd.attempt, time.monotonic())
            metrics.AGENT_RUNNING.set(len(self.attempts))

    async def on_control(self, msg: Message) -> None:
        with contextlib.suppress(Exception):
            faults.point("agent.on_control")  # tests: a control message lost on its way (fail drops it)
            cmd = decode(msg.data, CancelRun)
            self._cancel(cmd.run_id, cmd.attempt, cmd.reason, cmd.grace_seconds)

    def _cancel(self, run_id: str, attempt_no: int, reason: str, grace_seconds: float | None) -> None:
        attempt = self.attempts.get(run_id)
        if attempt is not None and attempt.cmd.attempt == attempt_no:
            # The record is cancelled (or preempted: a new attempt) and the lease revoked: stopped as a timeout
            # stops it (with a preemption's own grace), not reported
            self._stop(attempt, reason, grace=True, grace_seconds=grace_seconds)

    def _stops(self, stops: tuple[Stop, ...]) -> None:
        """A stop notice on the agent lease: the durable path of a cancel whose control message may be lost."""
        for stop in stops:
            self._cancel(stop.run_id, stop.attempt, stop.reason, stop.grace_seconds)

    def _lease_lost(self, nonce: str, why: str) -> None:
        """The agent lease of `nonce` is lost: every attempt bound to it stops now (waiting ones too); the server
        may have expired it, and the tracker re-dispatches their runs."""
        for attempts in list(self.live.values()):
            for attempt in list(attempts):
                if nonce and attempt.bound == nonce:
                    self._stop(attempt, why)

    async def beat(self) -> None:
        """Publish this agent's capacity, free resources and draining flag."""
        info = describe(self.ctx.settings, self.setup, self.agent_id, self.started_at, self.ctx.clock.now(),
                        len(self.attempts), self.draining)
        used = self.used
        info = msgspec.structs.replace(
            info, pending_reports=self.reports.queued, free_cpu=round(max(0.0, info.cpu - used.cpu), 3),
            free_memory_mb=max(0, info.memory_mb - used.memory_mb), free_gpus=max(0, info.gpus - used.gpus),
            job_user="" if self.ctx.settings.agent_sim else shown_job_user(self.job_user, self.scratches))
        info = self.gpu_health.stamp(info)  # placement clears a suspect GPU host only on a later pass
        try:
            await self.ctx.agents.put(self.agent_id, info)
        except JetcronError:
            metrics.HEARTBEAT_FAILURES.inc()
        metrics.AGENT_FREE_CPU.set(info.free_cpu or 0.0)
        metrics.AGENT_FREE_MEMORY.set((info.free_memory_mb or 0) * 2**20)
        metrics.AGENT_FREE_GPUS.set(info.free_gpus or 0)

    async def heartbeat(self) -> None:
        while not self.ctx.stop.is_set():
            await self.beat()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.ctx.stop.wait(), timeout=self.ctx.settings.heartbeat)

    async def drain(self) -> None:
        """Take nothing new; let running attempts finish within the grace period, then hand them back."""
        self.draining = True
        # Say so first: placement must not hand what we give back (or anything new) to us again. Bounded: a
        # frozen server answers nothing, and the entry expires by itself.
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.beat(), timeout=STOP_WRITE_TIMEOUT)
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
        while self.attempts and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.1)
        # Those handed back already, fenced, or reporting how they ended refuse it (attempt.hand_back).
        for attempt in list(self.attempts.values()):
            with contextlib.suppress(JetcronError):
                await attempt.hand_back("agent draining")
        while self.attempts:
            await asyncio.sleep(0.05)


_K = TypeVar("_K", str, int)


def cannot_switch_note(user: JobUser) -> str:
    """What an agent that cannot switch users says once at its start."""
    groups = sorted(set(os.getgroups()) - {os.getegid()})
    held = f" and its supplementary groups ({', '.join(map(str, groups))})" if groups else ""
    return (f"jobs run as this agent's own user {user.name}{held}: it cannot switch users ({user.cannot_switch}); "
            "they can read what it reads, its credential included, and reach each other. Run the agent as root, or "
            "give it CAP_SETUID, CAP_SETGID, CAP_CHOWN, CAP_DAC_OVERRIDE and CAP_KILL as ambient capabilities")


def shown_job_user(user: JobUser, scratches: Scratches | None) -> str:
    """AgentInfo.job_user: who this agent's jobs run as."""
    if user.uid is None:
        return "@agent"
    return "@own-uid" if scratches is not None and scratches.uids else user.name


def _assignment(msg: Message) -> AssignRun:
    try:
        return decode(msg.data, AssignRun)
    except Exception as exc:
        raise Drop(f"undecodable AssignRun: {exc}") from exc


def _index(index: dict[_K, list[Attempt]], key: _K, attempt: Attempt, add: bool) -> None:
    if add:
        index.setdefault(key, []).append(attempt)
        return
    found = index.get(key)
    if found is not None and attempt in found:
        found.remove(attempt)
        if not found:
            del index[key]


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
    ctx.busy = lambda: bool(agent.attempts)
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
        await agent.gpu_health.check()  # the first heartbeat already carries a result
    tasks = [background(ctx, agent.heartbeat()), background(ctx, agent.gpu_health.loop()),
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

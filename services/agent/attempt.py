"""One attempt on this agent: wait for its due time, run it under its lease, stream output, report."""

from __future__ import annotations

import asyncio
import contextlib
import time
from datetime import datetime

from opentelemetry.context import Context as TraceContext

from jetcron import faults
from jetcron.bus.lease import Lease
from jetcron.bus.publish import publish
from jetcron.core.errors import JetcronError, LeaseLost
from jetcron.services.agent.executor import Execution, Outcome
from jetcron.services.agent.strays import StrayGuard
from jetcron.services.runtime import Context
from jetcron.telemetry import metrics
from jetcron.telemetry.tracing import messaging_span, tracer
from jetcron.wire import subjects as s
from jetcron.wire.messages import AssignRun, RunFinished, RunHandedBack, RunStarted

TRUNCATED = b"\n[jetcron: output truncated at the per-run cap]\n"
# A run that ends sooner than this reports once: its finish carries the start (one write instead of two).
START_REPORT_DELAY = 0.25
_tracer = tracer("agent")


async def sleep_until(ctx: Context, at: datetime) -> None:
    """Coarse sleep to ~50 ms before, then a short precise one (timer slack, FIELD_NOTES)."""
    while (left := (at - ctx.clock.now()).total_seconds()) > 0.05:
        await asyncio.sleep(left - 0.05)
    if (left := (at - ctx.clock.now()).total_seconds()) > 0:
        await asyncio.sleep(left)


class Attempt:
    def __init__(self, ctx: Context, cmd: AssignRun, lease: Lease, env: dict[str, str], parent: TraceContext,
                 groups: StrayGuard) -> None:
        self.ctx = ctx
        self.groups = groups
        self.cmd = cmd
        self.lease = lease
        self.env = env
        self.parent = parent
        """The trace context the assignment carried: every span and report of this attempt continues it."""
        self.execution: Execution | None = None
        self.started_at: datetime | None = None
        self.pid = 0
        self.start_report: asyncio.Task[None] | None = None
        self.start_publishing = False
        self.succeeded = False
        self.fenced = False
        self.handed_back = False
        self.done = asyncio.Event()
        self.sent = 0
        self.seq = 0
        # The fencing token is the revision that granted the lease; renewals move the revision on.
        self.first_token = lease.token

    async def output(self, stream: str, data: bytes) -> None:
        cap = self.ctx.settings.log_cap_bytes
        if self.sent >= cap:
            return
        if self.sent + len(data) > cap:
            data = data[: cap - self.sent] + TRUNCATED
        self.sent += len(data)
        self.seq += 1
        with contextlib.suppress(JetcronError):
            await publish(self.ctx.js, s.logs_subject(self.cmd.run_id), data,
                          headers={s.HDR_LOG_STREAM: stream},
                          msg_id=s.msg_id(self.cmd.run_id, self.cmd.attempt, f"log{self.seq}"))

    async def keep_lease(self) -> None:
        """Renew at TTL/3; kill the child ourselves if the lease is taken or cannot be renewed in time."""
        ttl = self.ctx.settings.run_lease_ttl
        renewed = time.monotonic()
        while not self.done.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.done.wait(), timeout=ttl / 3)
            if self.done.is_set():
                return
            try:
                self.lease = await self.ctx.leases.renew(self.lease, ttl)
                renewed = time.monotonic()
            except LeaseLost:
                self._fence("lease taken (cancelled or re-dispatched)")
                return
            except JetcronError:
                metrics.HEARTBEAT_FAILURES.inc()
                if time.monotonic() - renewed > ttl - max(1.0, ttl / 5):
                    self._fence("lease could not be renewed in time")
                    return

    def _fence(self, why: str) -> None:
        self.fenced = True
        if self.execution is not None:
            self.execution.kill_now(why)

    async def run(self) -> None:
        cmd, spec = self.cmd, self.cmd.spec
        lease_task = asyncio.create_task(self.keep_lease())
        try:
            await sleep_until(self.ctx, cmd.due_at)
            with messaging_span(_tracer, "process", s.assign_subject(cmd.agent), parent=self.parent,
                                run_id=cmd.run_id, job=cmd.job, attempt=cmd.attempt) as span:
                outcome = await self._execute(spec.command)
                span.set_attribute("jetcron.outcome", outcome.outcome)
                faults.point("agent.after_exit")
                if not self.fenced and not self.handed_back:
                    await self._report(outcome)  # inside the span: the report carries its traceparent
        finally:
            self.done.set()
            await lease_task
            await self._settle_start_report()
            # After a success no attempt follows, so the lease may simply expire: one write saved per run.
            if not self.fenced and not self.succeeded:
                with contextlib.suppress(JetcronError):
                    await self.ctx.leases.release(self.lease)

    async def _execute(self, argv: list[str]) -> Outcome:
        if self.fenced:
            return Outcome("killed", None, "fenced before start")
        if self.ctx.settings.agent_sim:
            await self._started(0)
            return Outcome("succeeded", 0)
        self.execution = Execution(argv, self.env, memory_mb=self.cmd.spec.resources.memory_mb * 4,
                                   timeout=self.cmd.spec.timeout_seconds, kill_grace=self.ctx.settings.kill_grace,
                                   on_output=self.output)
        failed = await self.execution.start()
        if failed is not None:
            return failed
        self.groups.add(self.execution.pid)
        try:
            await self._started(self.execution.pid)
            return await self.execution.wait()
        finally:
            self.groups.remove(self.execution.pid)

    async def _started(self, pid: int) -> None:
        self.started_at = now = self.ctx.clock.now()
        self.pid = pid
        metrics.RUN_WAIT.observe(max(0.0, (now - self.cmd.due_at).total_seconds()))
        self.start_report = asyncio.create_task(self._report_start_later())

    async def _report_start_later(self) -> None:
        await asyncio.sleep(START_REPORT_DELAY)
        self.start_publishing = True
        assert self.started_at is not None
        await publish(self.ctx.js, s.event_subject("started"), RunStarted(
            run_id=self.cmd.run_id, attempt=self.cmd.attempt, token=self.first_token, agent=self.cmd.agent,
            pid=self.pid, at=self.started_at), msg_id=s.msg_id(self.cmd.run_id, self.cmd.attempt, "started"))

    async def _settle_start_report(self) -> None:
        """Before the finish: drop a start report not yet sent, or let one in flight land first (order)."""
        task = self.start_report
        if task is None:
            return
        if not self.start_publishing:
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError, JetcronError):
            await task

    async def _report(self, outcome: Outcome) -> None:
        await self._settle_start_report()
        if self.sent:
            # The end marker lets `runs logs --follow` stop; a run with no output has nothing to follow.
            await publish(self.ctx.js, s.logs_subject(self.cmd.run_id), b"", headers={s.HDR_LOG_END: "1"},
                          msg_id=s.msg_id(self.cmd.run_id, self.cmd.attempt, "logend"))
        kind = "cancelled" if outcome.outcome == "killed" else outcome.outcome
        await publish(self.ctx.js, s.event_subject("finished"), RunFinished(
            run_id=self.cmd.run_id, attempt=self.cmd.attempt, token=self.first_token, agent=self.cmd.agent,
            outcome=kind, exit_code=outcome.exit_code, reason=outcome.reason, at=self.ctx.clock.now(),
            started_at=self.started_at, pid=self.pid),
            msg_id=s.msg_id(self.cmd.run_id, self.cmd.attempt, "finished"))
        self.succeeded = kind == "succeeded"

    async def hand_back(self, why: str) -> None:
        """Drain: stop the child and give the run back for re-dispatch."""
        self.handed_back = True
        if self.execution is not None:
            self.execution.stop(why)
        subject = s.event_subject("handed_back")
        with messaging_span(_tracer, "publish", subject, parent=self.parent, run_id=self.cmd.run_id,
                            job=self.cmd.job, attempt=self.cmd.attempt):
            await publish(self.ctx.js, subject, RunHandedBack(
                run_id=self.cmd.run_id, attempt=self.cmd.attempt, token=self.first_token, agent=self.cmd.agent,
                reason=why, at=self.ctx.clock.now()), msg_id=s.msg_id(self.cmd.run_id, self.cmd.attempt, "handback"))

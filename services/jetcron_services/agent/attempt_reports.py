"""What one attempt tells the trackers: its output, its start (only once it has gone on a while), its finish (to a
tracker directly, or on the events stream) and its hand-back."""

from __future__ import annotations

import asyncio
import contextlib
from datetime import datetime

from opentelemetry.context import Context as TraceContext

from jetcron.core.errors import JetcronError
from jetcron.core.lifecycle.handoff import report_directly
from jetcron.telemetry.tracing import messaging_span, tracer
from jetcron.wire import subjects as s
from jetcron.wire.messages import AssignRun, RunFinished, RunHandedBack, RunStarted
from jetcron_services.agent.attempt_deps import AttemptDeps
from jetcron_services.agent.host.executor import Outcome
from jetcron_services.agent.ports import AttemptReportsPorts

TRUNCATED = b"\n[jetcron: output truncated at the per-run cap]\n"
_tracer = tracer("agent")


class AttemptReports:
    """One attempt's reports, each with the fencing token it was given and kept as long as the run's retention
    (`ttl`). Its start and finish wait for room in the agent's window (reports.ReportWindow): a herd's reports queue
    there, its starts do not."""

    # One per attempt, and a staged herd holds tens of thousands of attempts.
    __slots__ = ("cmd", "ctx", "deps", "parent", "publishing", "sent", "start", "token", "ttl")

    def __init__(self, ctx: AttemptReportsPorts, deps: AttemptDeps, cmd: AssignRun, *, token: int, ttl: int,
                 parent: TraceContext) -> None:
        self.ctx, self.deps, self.cmd, self.token, self.ttl = ctx, deps, cmd, token, ttl
        self.parent = parent
        """The trace context the assignment carried: the hand-back's span continues it."""
        self.start: asyncio.Task[None] | None = None
        """The start report, sent a while after the child started (Attempt._report_start_later)."""
        self.publishing = False
        """The start report has begun to publish: it is let land before the finish, no longer cancelled."""
        self.sent = 0
        """Bytes of output sent (the run's cap is `log_cap_bytes`)."""

    def capped(self, data: bytes) -> bytes | None:
        """What of an output chunk the run's cap leaves room for (the last one cut short and marked), counted as
        sent; None once the cap is reached."""
        cap = self.ctx.settings.log_cap_bytes
        if self.sent >= cap:
            return None
        if self.sent + len(data) > cap:
            data = data[: cap - self.sent] + TRUNCATED
        self.sent += len(data)
        return data

    async def output(self, data: bytes, label: str, step: str) -> None:
        """A chunk of the child's output, under its stream's label (`step`: its place in the message ids)."""
        with contextlib.suppress(JetcronError):
            await self.ctx.publisher.publish(s.logs_subject(self.cmd.run_id, self.cmd.agent), data,
                                             headers={s.HDR_LOG_STREAM: label},
                                             msg_id=s.msg_id(self.cmd.run_id, self.cmd.attempt, step),
                                             ttl=self.ttl)

    async def started(self, at: datetime, pid: int) -> None:
        async with self.deps.reports:
            await self.ctx.publisher.publish(s.event_subject("started", self.cmd.agent), RunStarted(
                run_id=self.cmd.run_id, attempt=self.cmd.attempt, token=self.token, agent=self.cmd.agent,
                pid=pid, at=at), msg_id=s.msg_id(self.cmd.run_id, self.cmd.attempt, "started"),
                ttl=self.ttl)

    async def settle_start(self) -> None:
        """Before the finish: drop a start report not yet sent, or let one in flight land first (order)."""
        task = self.start
        if task is None:
            return
        if not self.publishing:
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError, JetcronError):
            await task

    async def finished(self, outcome: Outcome, *, started_at: datetime | None, pid: int) -> None:
        """The finish, carrying the start; after `settle_start`."""
        kind = "cancelled" if outcome.outcome == "killed" else outcome.outcome
        finished = RunFinished(
            run_id=self.cmd.run_id, attempt=self.cmd.attempt, token=self.token, agent=self.cmd.agent,
            outcome=kind, exit_code=outcome.exit_code, reason=outcome.reason, at=self.ctx.clock.now(),
            started_at=started_at, pid=pid)
        async with self.deps.reports:
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

    async def _hand_in(self, finished: RunFinished) -> bool:
        """Whether a tracker took the finish report directly, its run record written (jetcron.bus.direct). The finish
        carries its start, so it needs no start report ahead of it (one still unread on the stream is then
        dropped as late). One to a request only while few reports are in flight here (jetcron.core.lifecycle.handoff
        .report_directly); batched (`agent_report_batch` > 1), always (reports.FinishBatches)."""
        finishes = self.deps.finishes
        if finishes is None or not report_directly(self.deps.reports.queued, finishes.most):
            return False
        return await finishes.hand(finished)

    async def handed_back(self, why: str, *, started: bool) -> None:
        # Sent only after the lease is released: the tracker re-dispatches at once, and the next agent's
        # acquire must find the lease free, or it skips the assignment and the run waits for a stall timeout.
        subject = s.event_subject("handed_back", self.cmd.agent)
        with messaging_span(_tracer, "publish", subject, parent=self.parent, run_id=self.cmd.run_id,
                            job=self.cmd.job, attempt=self.cmd.attempt):
            await self.ctx.publisher.publish(subject, RunHandedBack(
                run_id=self.cmd.run_id, attempt=self.cmd.attempt, token=self.token, agent=self.cmd.agent,
                reason=why, at=self.ctx.clock.now(), started=started),
                msg_id=s.msg_id(self.cmd.run_id, self.cmd.attempt, "handback"), ttl=self.ttl)

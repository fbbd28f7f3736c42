"""The placement leader's writes: an assignment (the run's record CASed to assigned, then an AssignRun per host handed
to its agent, or published) and a waiting reason, a bounded number of them in flight."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import datetime
from functools import partial

import msgspec

from jetcron import faults
from jetcron.bus.direct import Direct
from jetcron.core.errors import JetcronError
from jetcron.core.lifecycle.retry import OUTAGE_TRIES, outage_wait
from jetcron.core.lifecycle.run_state import RunEvent
from jetcron.core.lifecycle.runs import Change, apply
from jetcron.core.models import Run
from jetcron.core.placing.placement import Placement
from jetcron.telemetry.tracing import context_from_trace_id, messaging_span, tracer
from jetcron.wire import subjects as s
from jetcron.wire.codec import encode
from jetcron.wire.messages import AssignRun, PlaceRun
from jetcron_services.placement.ports import AssignerPorts
from jetcron_services.placement.view import View

ASSIGN_CONCURRENCY = 128
_tracer = tracer("placement")


class Assigner:
    """Writes the placement leader's decisions to the run records and hands its assignments to their agents."""

    def __init__(self, ctx: AssignerPorts, view: View, reason: Callable[[str], str], *, record_tokens: bool) -> None:
        self.ctx = ctx
        self.view = view
        self.reason = reason
        """The reason an assignment records for a run: a preemption's, while its victims make room (preempt.py)."""
        self.record_tokens = record_tokens
        """Whether an assignment carries its fencing token, its `assigned` write's revision (AssignRun.token): the
        runs bucket's revisions lie above every lease token (service.record_tokens())."""
        # A herd of thousands of writes at once would queue the leader lease's renewal behind them until it
        # lapsed (seen at 2,000 runs with fsync on); a bounded number in flight keeps the server as busy.
        self.writes = asyncio.Semaphore(ASSIGN_CONCURRENCY)
        self.sending: dict[str, asyncio.Future[None]] = {}
        """Assignments being handed to their agents (_send), by run: each outlives the pass that made it."""
        self.handoff = Direct(ctx.rpc, "assign", ctx.settings.handoff_timeout)
        """Assignments handed to their agents directly, the stream only for those not taken so (jetcron.bus.direct)."""

    async def assign(self, cmd: PlaceRun, placement: Placement, now: datetime) -> int | None:
        """CAS scheduled -> assigned (with the GPU devices) in a write slot, then one AssignRun per host, sent
        beside the pass (_send); the revision written, or None if the run moved on."""
        def decide(run: Run) -> Run | None:
            if run.attempt != cmd.attempt:
                return None
            new = apply(run, Change(event=RunEvent.ASSIGN, agents=placement.agents, reason=self.reason(cmd.run_id)),
                        now)
            if any(placement.gpu_indices.values()):
                new = msgspec.structs.replace(new, gpu_indices=placement.gpu_indices)
            return new

        async with self.writes:
            # From the record the runs watch delivered if the view kept it (else read first); the run moved on: None.
            try:
                done = await self.ctx.runs.change(cmd.run_id, decide, copy=self.view.copy(cmd.run_id), tries=2)
            except JetcronError:  # not found, an illegal transition, contended, storage trouble
                return None
            if done is None:
                return None
            run, new, written = done
            # Sent beside the pass, outside the write slots: a hand-off may wait for its agent's answer up to the
            # hand-off timeout, and a pass that waited for it left every slot freed meanwhile empty until the next.
            self.sending[run.run_id] = task = asyncio.ensure_future(
                self._send(cmd, run, new, placement, written if self.record_tokens else 0))
            task.add_done_callback(partial(self._sent, run.run_id))
            return written

    def _sent(self, run_id: str, task: asyncio.Future[None]) -> None:
        if self.sending.get(run_id) is task:
            del self.sending[run_id]

    async def _send(self, cmd: PlaceRun, run: Run, new: Run, placement: Placement, token: int) -> None:
        """One AssignRun per host of a run recorded as assigned (`token`: the attempt's fencing token, or 0). One
        not sent (a bug: _dispatch gives up on the storage's errors itself) leaves the run `assigned` until the
        tracker re-dispatches it as not started."""
        assert new.spec is not None
        # Judged now, from the policies as the tenants bucket last said: an agent re-checks nothing of the tenant's
        # itself (it may not read the tenants bucket), so a policy changed after the job was stored counts here.
        policy = self.view.policies.get(new.spec.tenant)
        root_allowed = new.spec.run_as_root and policy is not None and policy.allow_run_as_root
        try:
            with messaging_span(_tracer, "process", s.place_subject(cmd.priority),
                                parent=context_from_trace_id(run.trace_id), run_id=run.run_id, job=run.job,
                                attempt=run.attempt):
                for agent in placement.agents:
                    await self._dispatch(agent, AssignRun(
                        run_id=run.run_id, attempt=run.attempt, job=run.job, agent=agent, spec=new.spec,
                        scheduled_at=run.scheduled_at, due_at=run.due_at,
                        gpu_indices=placement.gpu_indices.get(agent, []),
                        gang=placement.agents if len(placement.agents) > 1 else [], keep_seconds=run.keep_seconds,
                        token=token, root_allowed=root_allowed))
        except Exception:
            self.ctx.log.exception("assignment not sent; the tracker re-dispatches it", run_id=run.run_id)
            return
        faults.point("placement.after_dispatch")  # chaos: assigned and AssignRun published, PlaceRun not acked

    async def _dispatch(self, agent: str, cmd: AssignRun) -> None:
        """Hand one assignment to its agent directly, or else publish it as an AssignRun, again while its stream
        does not answer (a NATS node lost): the run is already recorded as assigned, and a failure here once ended
        the placement loop for good (chaos suite). One never sent leaves the run `assigned` until the tracker
        re-dispatches it as not started. Waiting for the agent's answer takes no write slot; the publish does."""
        if await self.handoff.hand(agent, s.handoff_subject(agent), encode(cmd)):
            return
        for tries in range(1, OUTAGE_TRIES + 1):
            try:
                faults.point("placement.dispatch")
                async with self.writes:
                    await self.ctx.publisher.publish(s.assign_subject(agent), cmd,
                                                     msg_id=s.msg_id(cmd.run_id, cmd.attempt, f"assign.{agent}"))
                return
            except JetcronError as exc:
                if not exc.retryable or tries == OUTAGE_TRIES:
                    self.ctx.log.warning("assignment not sent; the tracker re-dispatches it", run_id=cmd.run_id,
                                         attempt=cmd.attempt, agent=agent, error=str(exc))
                    return
            await asyncio.sleep(outage_wait(tries))

    async def write_reason(self, run_id: str, cmd: PlaceRun, reason: str, now: datetime) -> None:
        """Record why the held run waits, in a write slot."""
        def decide(run: Run) -> Run | None:
            return apply(run, Change(event=RunEvent.WAIT, reason=reason), now) if run.attempt == cmd.attempt else None

        async with self.writes:
            # From the record the runs watch delivered, as assign does (no read first); one try on the stored record
            await self.ctx.runs.change(run_id, decide, copy=self.view.copy(run_id), tries=2)

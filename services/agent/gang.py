"""Gang runs on the agent: one attempt spread over several hosts, started, fenced and torn down as one.

The protocol (docs/architecture.md, "Gangs"):

- every member gets its own AssignRun (its GPU devices in CUDA_VISIBLE_DEVICES, the whole gang in
  JETCRON_GANG_HOSTS, its place in JETCRON_GANG_RANK); the first member is the gang's leader;
- the leader holds the run lease `run.<run_id>` and reports the gang's start and finish, as a
  single-host run does; every other member holds its member lease `gang.<agent>.<run_id>` for as
  long as the attempt lasts (also after its own child exited 0), reports nothing on success, and
  reports the gang failed (with the run's fencing token, read from the record) when its child fails;
- a member whose host dies lets its lease lapse: the tracker's reconciler then loses the run, which
  re-dispatches the whole gang as a new attempt;
- every member, leader included, reads the run record at each renewal and kills its child once the
  record has left its attempt (ended, failed, lost, retried): that is how a gang is torn down.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, Any

from nats.aio.msg import Msg

from jetcron.bus.lease import Lease
from jetcron.bus.publish import publish
from jetcron.core.errors import JetcronError
from jetcron.core.models import Run
from jetcron.core.run_state import ACTIVE
from jetcron.services.agent.attempt import Attempt
from jetcron.services.agent.executor import Outcome
from jetcron.telemetry.tracing import continue_trace
from jetcron.wire import subjects as s
from jetcron.wire.messages import AssignRun, RunFinished, RunHandedBack

if TYPE_CHECKING:
    from jetcron.services.agent.service import Agent


def gang_env(cmd: AssignRun) -> dict[str, str]:
    return {"JETCRON_GANG_HOSTS": ",".join(cmd.gang), "JETCRON_GANG_SIZE": str(len(cmd.gang)),
            "JETCRON_GANG_RANK": str(cmd.gang.index(cmd.agent))}


class _GangWatch(Attempt):
    """An attempt that also watches the run record and stops when the gang's attempt is over."""

    renews_while_reporting = True

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.over = asyncio.Event()
        """Set once the record has left this attempt: the gang is over."""
        self.exited = False

    def keeper_delay(self) -> float:
        return 0.0  # the record watch rides on the keeper: a member must see the gang end while it waits

    async def keep_lease(self) -> None:
        watch = asyncio.create_task(self._watch_record())
        try:
            await super().keep_lease()
        finally:
            watch.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watch

    async def _watch_record(self) -> None:
        every = self.ctx.settings.run_lease_ttl / 3
        while not self.done.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.done.wait(), timeout=every)
            if self.done.is_set():
                return
            run = await self._record()
            if run is None or (run.attempt == self.cmd.attempt and run.state in ACTIVE):
                continue
            self.over.set()
            if not self.exited:
                self.ctx.log.info("gang attempt over: stopping this member", run_id=self.cmd.run_id,
                                  attempt=self.cmd.attempt, state=str(run.state), now_attempt=run.attempt)
                self._fence(f"gang attempt {self.cmd.attempt} is over (run {run.state}, attempt {run.attempt})")
            return

    async def _record(self) -> Run | None:
        with contextlib.suppress(JetcronError):
            found = await self.ctx.runs.maybe(self.cmd.run_id)
            return None if found is None else found[0]
        return None


class GangLeader(_GangWatch):
    """The first member: the run lease and the gang's reports, plus the record watch."""

    async def _report(self, outcome: Outcome) -> None:
        self.exited = True
        await super()._report(outcome)


class GangMember(_GangWatch):
    """Any other member: a member lease, no start report, a failure report for the whole gang."""

    async def _report_start_later(self) -> None:
        return  # the leader's start is the gang's start

    def _log_label(self, stream: str) -> tuple[str, str]:
        # The same logs subject as the leader, but message ids of its own (else deduplicated away).
        return f"{stream}@{self.cmd.agent}", f"{self.cmd.agent}.log{self.seq}"

    async def _report(self, outcome: Outcome) -> None:
        self.exited = True
        self.succeeded = False  # the member lease is released at the end, whatever happened
        if outcome.outcome == "succeeded":
            await self.over.wait()  # hold the member lease while the gang runs on
            return
        run = await self._record()
        if run is None or run.attempt != self.cmd.attempt or run.state not in ACTIVE:
            return
        kind = "cancelled" if outcome.outcome == "killed" else outcome.outcome
        await publish(self.ctx.js, s.event_subject("finished", self.cmd.agent), RunFinished(
            run_id=self.cmd.run_id, attempt=self.cmd.attempt, token=run.token, agent=self.cmd.agent,
            outcome=kind, exit_code=outcome.exit_code, reason=f"gang member {self.cmd.agent}: {outcome.reason}",
            at=self.ctx.clock.now()), msg_id=s.msg_id(self.cmd.run_id, self.cmd.attempt, f"finished.{self.cmd.agent}"))

    async def hand_back(self, why: str) -> None:
        """Drain: give the whole gang back (with the run's token: a member's own token fences nothing)."""
        self.handed_back = True
        self.over.set()
        if self.execution is not None:
            self.execution.stop(why)
        run = await self._record()
        if run is None or run.attempt != self.cmd.attempt or run.state not in ACTIVE:
            return
        await publish(self.ctx.js, s.event_subject("handed_back", self.cmd.agent), RunHandedBack(
            run_id=self.cmd.run_id, attempt=self.cmd.attempt, token=run.token, agent=self.cmd.agent,
            reason=f"gang member {self.cmd.agent}: {why}", at=self.ctx.clock.now()),
            msg_id=s.msg_id(self.cmd.run_id, self.cmd.attempt, f"handback.{self.cmd.agent}"))


async def take_gang(agent: Agent, cmd: AssignRun, msg: Msg) -> None:
    """Acquire the leader's run lease or this member's lease (taking it from an older attempt), then start."""
    ctx = agent.ctx
    leader = cmd.gang[0] == agent.agent_id
    key = s.run_lease_key(cmd.run_id) if leader else s.gang_lease_key(cmd.run_id, agent.agent_id)
    ttl, now = ctx.settings.run_lease_ttl, ctx.clock.now()
    # An older attempt of this gang may still hold it: the record moved on, so it is taken over (that holder's
    # next renewal fails and it stops).
    lease: Lease | None = await ctx.leases.take(key, agent.agent_id, ttl, attempt=cmd.attempt, now=now)
    if lease is None:
        ctx.log.info("gang assignment skipped: lease held elsewhere", run_id=cmd.run_id, attempt=cmd.attempt,
                     key=key)
        return
    token = lease.token
    kind = GangLeader if leader else GangMember
    attempt = kind(ctx, cmd, lease, lambda: {**agent._env(cmd, token), **gang_env(cmd)}, continue_trace(msg.headers),
                   agent.strays, agent.setup)
    agent.hold(attempt)
    agent._tasks.add(task := asyncio.create_task(agent._run(attempt)))
    task.add_done_callback(agent._tasks.discard)

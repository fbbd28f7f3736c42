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
- every member, leader included, reads the run record at each renewal and stops its child once the
  record has left its attempt (ended, failed, lost, retried): that is how a gang is torn down. A cancel or a
  preemption found there stops it with the grace its control message gives (jetcron.core.lifecycle.gang_end).

A member is an attempt like any other (attempt.py, its lifecycle jetcron.core.lifecycle.attempt_state): the agent takes
its lease and starts it in one of its slots (`Agent.start`); this module says which lease and which kind.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from jetcron.core.errors import JetcronError
from jetcron.core.lifecycle.attempt_state import REPORTS, AttemptEvent
from jetcron.core.lifecycle.gang_end import member_stop
from jetcron.core.lifecycle.run_state import ACTIVE
from jetcron.core.models import Run
from jetcron.wire import subjects as s
from jetcron.wire.messages import AssignRun, RunFinished, RunHandedBack
from jetcron_services.agent.attempt import Attempt
from jetcron_services.agent.host.executor import Outcome
from jetcron_services.agent.ports import GangPorts


def gang_env(cmd: AssignRun) -> dict[str, str]:
    return {"JETCRON_GANG_HOSTS": ",".join(cmd.gang), "JETCRON_GANG_SIZE": str(len(cmd.gang)),
            "JETCRON_GANG_RANK": str(cmd.gang.index(cmd.agent))}


def lease_key(cmd: AssignRun, agent_id: str) -> str:
    """The leader holds the run lease; every other member its own member lease."""
    return s.run_lease_key(cmd.run_id) if cmd.gang[0] == agent_id else s.gang_lease_key(cmd.run_id, agent_id)


def member_kind(cmd: AssignRun, agent_id: str) -> type[Attempt]:
    return GangLeader if cmd.gang[0] == agent_id else GangMember


class _GangWatch(Attempt):
    """An attempt that also watches the run record and stops when the gang's attempt is over."""

    ctx: GangPorts
    """Made, as every attempt, by the intake, whose ports hold the run records too (IntakePorts)."""
    renews_while_reporting = True
    may_stage = False  # its keeper watches the record from the start (keeper_delay), also while it waits

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.over = asyncio.Event()
        """Set once the gang's attempt is over for this member: the record has left it, or it was fenced or
        handed back."""

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
            if run is None or (stop := member_stop(run, self.cmd.attempt, self.ctx.clock.now())) is None:
                continue
            self.over.set()
            if self.phase not in REPORTS:  # a child that ended and reported has nothing left to kill
                self.ctx.log.info("gang attempt over: stopping this member", run_id=self.cmd.run_id,
                                  attempt=self.cmd.attempt, state=str(run.state), now_attempt=run.attempt,
                                  grace=stop.grace)
                self.fence(stop.why, grace=stop.grace, grace_seconds=stop.grace_seconds)
            return

    def _fenced(self) -> None:
        self.over.set()  # a member holding its lease for the gang holds nothing any more

    async def _record(self) -> Run | None:
        with contextlib.suppress(JetcronError):
            found = await self.ctx.runs.maybe(self.cmd.run_id)
            return None if found is None else found[0]
        return None


class GangLeader(_GangWatch):
    """The first member: the run lease and the gang's reports, plus the record watch."""


class GangMember(_GangWatch):
    """Any other member: a member lease, no start report, a failure report for the whole gang."""

    async def _report_start_later(self) -> None:
        return  # the leader's start is the gang's start

    def _log_label(self, stream: str) -> tuple[str, str]:
        # The same logs subject as the leader, but message ids of its own (else deduplicated away).
        return f"{stream}@{self.cmd.agent}", f"{self.cmd.agent}.log{self.seq}"

    async def _report(self, outcome: Outcome) -> None:
        if outcome.outcome == "succeeded":
            self._apply(AttemptEvent.HOLD)  # never SUCCEEDED: the member lease is released at the end
            await self.over.wait()  # hold the member lease while the gang runs on
            return
        run = await self._record()
        if run is None or run.attempt != self.cmd.attempt or run.state not in ACTIVE:
            return
        kind = "cancelled" if outcome.outcome == "killed" else outcome.outcome
        await self.ctx.publisher.publish(s.event_subject("finished", self.cmd.agent), RunFinished(
            run_id=self.cmd.run_id, attempt=self.cmd.attempt, token=run.token, agent=self.cmd.agent,
            outcome=kind, exit_code=outcome.exit_code, reason=f"gang member {self.cmd.agent}: {outcome.reason}",
            at=self.ctx.clock.now()), msg_id=s.msg_id(self.cmd.run_id, self.cmd.attempt, f"finished.{self.cmd.agent}"),
            ttl=self.ttl)

    async def _handing_back(self, why: str) -> None:
        """Give the whole gang back now (with the run's token: a member's own token fences nothing)."""
        self.over.set()
        run = await self._record()
        if run is None or run.attempt != self.cmd.attempt or run.state not in ACTIVE:
            return
        await self.ctx.publisher.publish(s.event_subject("handed_back", self.cmd.agent), RunHandedBack(
            run_id=self.cmd.run_id, attempt=self.cmd.attempt, token=run.token, agent=self.cmd.agent,
            reason=f"gang member {self.cmd.agent}: {why}", at=self.ctx.clock.now()),
            msg_id=s.msg_id(self.cmd.run_id, self.cmd.attempt, f"handback.{self.cmd.agent}"), ttl=self.ttl)

    async def _give_back(self, why: str) -> None:
        return  # given back at once, by `_handing_back`

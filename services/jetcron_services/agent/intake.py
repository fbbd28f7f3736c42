"""Assignments coming in: from this agent's stream (`take`), or handed over directly by placement (`handed`). One at a
time per run, each in a slot of its own: its lease taken (the run's claim, bound to the agent's lease, or a gang
member's own), its attempt made, and handed to the agent to start."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from functools import partial
from typing import Protocol

from jetcron.bus.consume import Drop, Retry, touch
from jetcron.bus.lease import unclaimed
from jetcron.bus.ports import Message
from jetcron.core.lifecycle import leases
from jetcron.telemetry.tracing import continue_trace
from jetcron.wire import subjects as s
from jetcron.wire.codec import decode
from jetcron.wire.messages import HANDOFF_REFUSED, HANDOFF_TAKEN, AssignRun
from jetcron_services.agent import gang
from jetcron_services.agent.attempt import Attempt
from jetcron_services.agent.attempt_deps import AttemptDeps
from jetcron_services.agent.held import HeldAttempts
from jetcron_services.agent.host.confine import JobUser, job_env
from jetcron_services.agent.liveness import AgentLiveness
from jetcron_services.agent.ports import IntakePorts
from jetcron_services.agent.waiting import Waiting

LEASE_WRITES = 64
"""Lease acquisitions in flight: the leader and shard leases share their bucket's write queue, and a thousand
run leases ahead of a leader's renewal (a herd's assignments, fsync on) made it time out (placement and the
trigger lost their leases at the instant); the same bound as placement's assignment writes, halved."""


class Starter(Protocol):
    """The agent, as its intake hands it attempts: read at each use, as a drain may begin while one waits."""

    draining: bool

    async def start(self, attempt: Attempt) -> None: ...

    def stop_attempt(self, attempt: Attempt, why: str) -> None: ...


class Intake:
    """Takes each assignment in a slot of the agent's (`slots`, given back by the agent when its attempt ends, or
    here when none starts)."""

    def __init__(self, ctx: IntakePorts, agent_id: str, agent: Starter, *, held: HeldAttempts, slots: asyncio.Semaphore,
                 waiting: Waiting[Attempt], liveness: AgentLiveness, deps: AttemptDeps, job_user: JobUser) -> None:
        self.ctx, self.agent_id, self.agent = ctx, agent_id, agent
        self.held, self.slots, self.waiting, self.liveness = held, slots, waiting, liveness
        self.deps = deps
        self.job_user = job_user
        """Who jobs run as: their HOME."""
        self.lease_writes = asyncio.Semaphore(LEASE_WRITES)
        self.takes: dict[str, asyncio.Event] = {}
        """Runs whose assignment is being taken now, set when it is done (`_taking`)."""

    async def take(self, msg: Message) -> None:
        """Consumer handler: wait for a slot, take the lease (the run lease, or a gang member's own), start the
        attempt in the background, ack."""
        cmd = _assignment(msg)
        async with self._taking(cmd.run_id):
            if self._known(cmd):
                return
            await self._slot(msg)
            await self._take(cmd, msg)

    async def handed(self, msg: Message) -> bytes:
        """The direct hand-off (the agent's `handoffs`): take an assignment as `take` does, answered `taken` once its
        claim is stored, or it has started with its claim still to write (jetcron.core.lifecycle.leases.claims_late),
        or it is known here. Refused at once, not waited on, when no slot is free or the agent drains: placement then
        sends it to this agent's stream, which waits for a slot. Whatever else goes wrong (the agent lease not held,
        the storage) is refused too (jetcron.bus.direct.Taker)."""
        cmd = _assignment(msg)
        async with self._taking(cmd.run_id):
            if self._known(cmd):
                return HANDOFF_TAKEN
            if self.agent.draining or self.slots.locked():
                return HANDOFF_REFUSED
            await self.slots.acquire()  # free: returns at once
            await self._take(cmd, msg, direct=True)
            return HANDOFF_TAKEN

    @contextlib.asynccontextmanager
    async def _taking(self, run_id: str) -> AsyncIterator[None]:
        """One assignment of a run taken at a time here: the same one may come twice at once, handed over
        directly and then (its answer late) by the stream, and two claims of one attempt would fence each
        other. The second waits for the first and then finds it known (`_known`)."""
        while (busy := self.takes.get(run_id)) is not None:
            await busy.wait()
        self.takes[run_id] = done = asyncio.Event()
        try:
            yield
        finally:
            del self.takes[run_id]
            done.set()

    def _known(self, cmd: AssignRun) -> bool:
        """Whether this assignment is one here already: running, or ended lately. An older attempt of the run
        still here is stopped (a re-dispatch onto this host) and the assignment is not known."""
        existing = self.held.attempts.get(cmd.run_id)
        if existing is not None:
            if existing.cmd.attempt >= cmd.attempt:
                return True  # duplicate delivery of a run we are already running
            self.agent.stop_attempt(existing, f"superseded by attempt {cmd.attempt}")
            return False
        if self.held.ended.ran(cmd.run_id, cmd.attempt, time.monotonic()):
            # Every re-dispatch is a new attempt, so this is the same assignment again: its ack was lost.
            self.ctx.log.info("assignment skipped: this attempt already ran here", run_id=cmd.run_id,
                              attempt=cmd.attempt)
            return True
        return False

    async def _slot(self, msg: Message) -> None:
        """Wait for a free slot; meanwhile tell the server the assignment is being worked on (no redelivery)."""
        while True:
            try:
                await asyncio.wait_for(self.slots.acquire(), timeout=10)
                return
            except TimeoutError:
                await touch(msg)

    async def _take(self, cmd: AssignRun, msg: Message, *, direct: bool = False) -> None:
        """In the slot taken for it: take the assignment's lease and start its attempt (or give the slot back).
        `direct`: handed over by placement's request, just after its assignment was written (not from the stream,
        where it may have waited for a slot for any time)."""
        if self.agent.draining:  # stopped taking work while this one waited for a slot: leave it for the reconciler
            self.slots.release()
            raise Retry(1.0, "agent draining")
        try:
            attempt = await self._lease(cmd, msg, direct)
        except BaseException:
            self.slots.release()
            raise
        mine = self.held.attempts.get(cmd.run_id)
        if attempt is None or (mine is not None and mine.cmd.attempt >= cmd.attempt):
            # Held for this attempt elsewhere, or for a newer one (or a second delivery took it meanwhile): a
            # stale assignment; the run record decides. An older attempt of the run still here (ended, its lease
            # release still to come) is replaced: skipping this one left the run to the tracker's stall timeout.
            self.slots.release()
            self.ctx.log.info("assignment skipped: lease held elsewhere", run_id=cmd.run_id, attempt=cmd.attempt)
            return
        await self.agent.start(attempt)

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


def _assignment(msg: Message) -> AssignRun:
    try:
        return decode(msg.data, AssignRun)
    except Exception as exc:
        raise Drop(f"undecodable AssignRun: {exc}") from exc

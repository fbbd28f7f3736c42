"""An attempt's claim on its run: the lease it holds, renewed by a keeper while its child may run, written late by an
attempt that started before it, and released once the attempt has ended."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from typing import Protocol

from jetcron.bus.lease import Lease
from jetcron.config import Settings
from jetcron.core.errors import JetcronError, LeaseLost
from jetcron.core.lifecycle import leases
from jetcron.core.lifecycle.attempt_state import AttemptPhase
from jetcron.telemetry import metrics
from jetcron.wire.messages import AssignRun
from jetcron_services.agent.ports import RunClaimPorts

RELEASE_RETRY = 1.0
"""Seconds between tries to release a bound claim while the storage does not answer (RunClaim.release), and to
write a late claim (RunClaim.write_late)."""


class Kept(Protocol):
    """What the claim asks of its attempt: whether it is done or fenced, when its keeper starts and what the keeper
    runs, and to stop for good (Attempt.fence)."""

    done: asyncio.Event
    phase: AttemptPhase
    cmd: AssignRun

    def keeper_delay(self) -> float: ...

    async def keep_lease(self) -> None: ...

    def fence(self, why: str) -> None: ...


class RunClaim:
    """The lease an attempt holds: a run claim bound to the agent's lease, or a gang member's own. It is handed its
    attempt at each call and keeps it only in the keeper's timer and task, both over by the attempt's end (`stop`):
    an attempt left in a reference cycle waits for the cycle collector's full pass (docs/benchmarks.md, "What an
    agent holds")."""

    # One per attempt, and a staged herd holds tens of thousands of attempts.
    __slots__ = ("_timer", "bound", "granted", "keeper", "lease", "leased_at", "ttl", "wake")

    def __init__(self, lease: Lease, settings: Settings, granted: float | None = None,
                 asked_at: float | None = None) -> None:
        self.lease = lease
        self.bound = lease.value.bound
        """The agent lease nonce the claim is bound to; "" for a gang member's, which is its own."""
        self.ttl = settings.run_claim_ttl if self.bound else settings.run_lease_ttl
        """The claim's TTL: a bound one is renewed rarely (its liveness is the agent's lease), its own every TTL/3."""
        self.granted = self.ttl if granted is None else granted
        """Seconds the lease was taken for: a staged run's first lease also covers its wait (first_grant)."""
        self.leased_at = time.monotonic() if asked_at is None else asked_at
        """Monotonic time the lease write was sent: the server's expiry is never earlier than this + granted."""
        self.keeper: asyncio.Task[None] | None = None
        """Renews the lease (the attempt's keep_lease); started at the first renewal (`arm`), if the attempt is still
        on by then."""
        self._timer: asyncio.TimerHandle | None = None
        self.wake = asyncio.Event()
        """Wakes the keeper to stop: the attempt is done, or its child has ended."""

    def covers(self, at: float) -> bool:
        """The first lease still holds at monotonic time `at` (before any renewal: a waiting attempt's)."""
        return at < leases.fence_at(self.leased_at, self.granted, self.ttl)

    def first_renewal(self) -> float:
        """Monotonic time of the first renewal (the late claim's, once one is written)."""
        return leases.renew_at(self.leased_at, self.granted, self.ttl)

    def arm(self, attempt: Kept) -> None:
        """Start the keeper at the attempt's first renewal (its keeper_delay). Most attempts (every sim one, a herd's)
        end before it, and a task waiting meanwhile costs a herd's start rate for nothing."""
        self._timer = asyncio.get_running_loop().call_later(max(0.0, attempt.keeper_delay()), self._start, attempt)

    def _start(self, attempt: Kept) -> None:
        if not attempt.done.is_set():
            self.keeper = asyncio.create_task(attempt.keep_lease())

    def disarm(self) -> None:
        """A keeper not started yet never starts."""
        if self._timer is not None:
            self._timer.cancel()

    async def stop(self) -> None:
        """The attempt is done: its keeper stops (or never starts)."""
        self.wake.set()
        self.disarm()
        if self.keeper is not None:
            await self.keeper

    async def keep(self, ctx: RunClaimPorts, attempt: Kept, *, over: Callable[[], bool]) -> None:
        """Renew at TTL/3 until `over()` (checked again whenever `wake` is set); fence the attempt if the lease is
        taken or cannot be renewed in time.

        The deadline (last renewal sent + TTL - margin) is checked on our own monotonic clock before each
        renewal and bounds each renewal's wait: a partition or a SIGSTOP must not let the child outlive a
        lease the server has already expired (another attempt may hold it by then).

        Once the child has ended the lease is no longer renewed: it fences nothing any more, and its report
        queued here is covered by the agent's heartbeat (`pending_reports`), which the tracker waits on before it
        calls a run with a lapsed lease lost. Renewed instead, the finished attempts of a 100,000 herd waiting
        minutes for the tracker wrote hundreds of renewals a second at the instant, the busiest moment; those
        that did not land in time made runs run twice.
        """
        ttl = self.ttl
        renewed, granted = self.leased_at, self.granted
        while not over():
            self.wake.clear()
            wake = leases.renew_at(renewed, granted, ttl)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.wake.wait(), timeout=max(0.0, wake - time.monotonic()))
            if over():
                return
            deadline = leases.fence_at(renewed, granted, ttl)
            sent = time.monotonic()
            if sent >= deadline:
                attempt.fence(f"lease not renewed for {sent - renewed:.1f}s (paused or cut off)")
                return
            try:
                self.lease = await asyncio.wait_for(ctx.leases.renew(self.lease, ttl), timeout=deadline - sent)
                renewed, granted = sent, ttl
            except LeaseLost:
                attempt.fence("lease taken (cancelled or re-dispatched)")
                return
            except (JetcronError, TimeoutError):
                metrics.HEARTBEAT_FAILURES.inc()
                if time.monotonic() >= deadline:
                    attempt.fence("lease could not be renewed in time")
                    return

    async def write_late(self, ctx: RunClaimPorts, attempt: Kept) -> bool:
        """Write the claim of an attempt that started without one (jetcron.core.lifecycle.leases.claims_late), before
        its start report says it runs; an older attempt's claim is taken over as at any take. Whether it holds it: one
        held for this attempt elsewhere or for a newer one, or not written in time
        (jetcron.core.lifecycle.leases.claim_by) (the storage not answering; the tracker judges an attempt never claimed
        by the assignment stall), fences the attempt. Written, its keeper is armed (if the attempt is still on)."""
        deadline = leases.claim_by(self.leased_at, ctx.settings.assign_stall)
        while attempt.phase is not AttemptPhase.FENCED:
            sent = time.monotonic()
            if sent >= deadline:
                attempt.fence("claim not written in time (the storage did not answer)")
                return False
            try:
                lease = await asyncio.wait_for(ctx.leases.take(
                    self.lease.key, self.lease.value.holder, self.ttl, attempt=attempt.cmd.attempt,
                    now=ctx.clock.now(), bound=self.bound), timeout=deadline - sent)
            except (JetcronError, TimeoutError):
                await asyncio.sleep(min(RELEASE_RETRY, max(0.0, deadline - time.monotonic())))
                continue
            if lease is None:
                attempt.fence("claim held for another or a newer attempt (re-dispatched or cancelled)")
                return False
            self.lease, self.leased_at, self.granted = lease, sent, self.ttl
            if not attempt.done.is_set():
                self.arm(attempt)
            return True
        return False

    async def release(self, ctx: RunClaimPorts, agent_nonce: Callable[[], str]) -> None:
        """Give the claim up: the run can be judged (and run again) without waiting for its TTL.

        A claim of its own lapses within the run lease TTL if this fails. A bound claim lives as long as the
        agent's lease: left behind by an attempt that ended without its report landing (the storage not
        answering), it would keep the run `running` for the claim's long TTL. So its release is tried again until
        it lands, the agent stops, or the agent's lease is no longer the one the claim is bound to (`agent_nonce`;
        then the tracker judges the claim dead anyway)."""
        if not self.lease.token:  # never claimed: nothing stored to give up
            return
        while True:
            try:
                await ctx.leases.release(self.lease)
                return
            except JetcronError:
                if not self.bound or ctx.stop.is_set() or agent_nonce() != self.bound:
                    return
            await asyncio.sleep(RELEASE_RETRY)

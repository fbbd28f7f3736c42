"""The placement service: the leader takes due runs, orders them fairly, fits them, and assigns them."""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import time
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from functools import partial

from jetcron import faults
from jetcron.bus.lease import HeldLease
from jetcron.bus.ports import Message
from jetcron.core.errors import JetcronError
from jetcron.core.lifecycle import leases
from jetcron.core.placing.placement import Demand, Placement
from jetcron.core.timing.pacing import TokenBucket, pause_after
from jetcron.telemetry import metrics
from jetcron.wire import subjects as s
from jetcron.wire.messages import PlaceRun
from jetcron_services.placement.assign import Assigner
from jetcron_services.placement.held import HeldRun, HeldRuns
from jetcron_services.placement.pass_decision import decide
from jetcron_services.placement.ports import LeadPorts, PlacerPorts, RecordTokensPorts, TakeUpPorts
from jetcron_services.placement.preempt import Preemptor
from jetcron_services.placement.view import View, open_board
from jetcron_services.runtime import Context, background

REASONS_PER_SECOND = 64
"""Waiting reasons the leader writes at most per second (a burst of as many), the first in the queue's order
first; the rest are written as the budget comes back, and a run placed before its turn never has one. Unbounded,
a backlog of 100,000 runs behind full agents asked 100,000 writes of the pass that first found them waiting, and
a backlog that stood (every run waiting past pass_decision.REASON_AFTER) a write more for every run, ahead of the
assignments that would drain it (bench/longlife.py)."""


class Placer:
    """The placement leader's passes: each decides in memory where the held runs go (pass_decision.py), then writes
    the assignments and waiting reasons it decided (assign.py)."""

    def __init__(self, ctx: PlacerPorts, view: View, over: asyncio.Event | None = None,
                 acted: Callable[[datetime], None] | None = None, *, record_tokens: bool = False,
                 timer: Callable[[], float] = time.monotonic,
                 pause: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
        self.ctx = ctx
        self.timer = timer
        """What a pass's deciding is timed by: the time the loop was held, not the clock runs are judged by."""
        self.pause = pause
        """How the leader waits after a pass whose deciding was slow (jetcron.core.timing.pacing)."""
        self.view = view
        self.acted = acted
        """Told the time of each pass done: the leader's last action, which its lease carries (the takeover gap)."""
        self.over = over if over is not None else asyncio.Event()
        """Set when this leadership ends. Its loops stop on it, not only on cancel(): Python 3.11's wait_for()
        swallows a cancel that lands as the awaited event is set, and `view.changed` is set all the time
        under a herd, so a cancelled loop went on forever and the replica never led again."""
        self.ahead = timedelta(seconds=ctx.settings.lead_seconds)
        """How long before its due time a held run is assigned (the agent then starts it on time)."""
        self.held_runs = HeldRuns(ctx, view)
        """The runs waiting for placement, with the messages they came with (held.py)."""
        self.preemptor = Preemptor(ctx, view)
        """A run with no place may take that of lower-priority runs whose policy allows it (preempt.py)."""
        self.assigner = Assigner(ctx, view, self.preemptor.reason, record_tokens=record_tokens)
        """The writes a pass decided: assignments, handed to their agents, and waiting reasons (assign.py)."""
        self.reasons = TokenBucket.full(REASONS_PER_SECOND, ctx.clock.now().timestamp())
        """Waiting reasons that may be written now (REASONS_PER_SECOND, refilled by the clock)."""
        self.next_due: datetime | None = None
        """When the last pass's nearest demand that was too early to assign comes within `lead` of its due time."""

    @property
    def held(self) -> dict[str, HeldRun]:
        """The held runs by run id."""
        return self.held_runs.runs

    async def take(self, msg: Message) -> None:
        await self.held_runs.take(msg)

    def hold(self, cmd: PlaceRun, msg: Message | None) -> None:
        self.held_runs.hold(cmd, msg)

    def offered(self, cmd: PlaceRun) -> None:
        self.held_runs.offered(cmd)

    def _unqueue(self, run_id: str) -> Message | None:
        return self.held_runs.unqueue(run_id)

    async def follow_records(self) -> int:
        return await self.held_runs.follow_records()

    def let_go(self) -> None:
        self.held_runs.let_go()

    async def sent(self) -> None:
        """Until every assignment made so far has been handed over (or published), and the messages held for
        them acked."""
        while self.assigner.sending or self.held_runs.acking:
            await asyncio.gather(*self.assigner.sending.values(), *self.held_runs.acking)

    async def place_once(self) -> float:
        """Decide in memory first, then carry out every assignment of this pass concurrently. Returns the
        seconds the deciding took (the part that holds the loop; the writes then awaited leave it free)."""
        began = self.timer()
        now = self.ctx.clock.now()
        budget = int(self.reasons.available(now.timestamp()))
        decision = decide(self.view, self.held, self.preemptor, now, ahead=self.ahead, budget=budget)
        self.reasons.take(now.timestamp(), len(decision.waiting))
        self.next_due = decision.due
        for unsatisfiable, count in decision.unplaced.items():
            if count:
                metrics.child(metrics.PLACEMENTS, result="unsatisfiable" if unsatisfiable else "waiting").inc(count)
        decided = self.timer() - began
        await asyncio.gather(*(self._carry_out(d, p, now) for d, p in decision.chosen),
                             *(self._note_waiting(r, why, now) for r, why in decision.waiting))
        return decided

    async def _carry_out(self, demand: Demand, placement: Placement, now: datetime) -> None:
        if not await self.preemptor.clear(demand, now):
            self.view.queue.push(demand)  # a run it was to preempt could not be: it waits for the next pass
            return
        entry = self.held_runs.take_out(demand.run_id)
        if entry is None:  # its record moved on while the pass cleared its place (moved_on): nothing to assign
            self.preemptor.done(demand.run_id)
            self.view.unhold(demand.run_id)
            return
        cmd, msg, _ = entry
        written = await self._assign(cmd, placement, now)
        self.preemptor.done(demand.run_id)
        if written is not None:
            self.view.assigned(demand.run_id, written)
            metrics.child(metrics.PLACEMENTS, result="placed").inc()
        else:
            self.view.unhold(demand.run_id)
        # Acked once its AssignRun is sent (a placement that dies between the two leaves it to be redelivered)
        self.held_runs.ack_later(msg, after=self.assigner.sending.get(demand.run_id))

    async def _assign(self, cmd: PlaceRun, placement: Placement, now: datetime) -> int | None:
        return await self.assigner.assign(cmd, placement, now)

    async def _note_waiting(self, run_id: str, reason: str, now: datetime) -> None:
        if (cmd := self.held_runs.note(run_id, reason)) is not None:
            with contextlib.suppress(JetcronError):
                await self._write_reason(run_id, cmd, reason, now)

    async def _write_reason(self, run_id: str, cmd: PlaceRun, reason: str, now: datetime) -> None:
        await self.assigner.write_reason(run_id, cmd, reason, now)

    async def loop(self) -> None:
        while not self.over.is_set():
            self.view.changed.clear()
            try:
                faults.point("placement.pass")
                if wait := pause_after(await self.place_once()):
                    await self.pause(wait)
                if self.acted is not None:
                    self.acted(self.ctx.clock.now())
            except Exception:
                # Nobody awaits this task until leadership ends: a pass that raised would leave a leader that
                # places nothing, and the next pass may well succeed.
                self.ctx.log.exception("placement pass failed")
                await asyncio.sleep(0.5)
                continue
            nearest = self.next_due
            delay = 0.5 if nearest is None else max(0.005, min(0.5, (nearest - self.ctx.clock.now()).total_seconds()))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.view.changed.wait(), timeout=delay)


async def lead(ctx: LeadPorts, view: View) -> None:
    """Hold the leader lease; while held, consume and place. A standby keeps its view warm meanwhile."""
    me = f"placement-{secrets.token_hex(4)}"
    ctx.log.info("placement ready (standby until it holds the leader lease)", replica=me)
    ttl = ctx.settings.leader_lease_ttl
    leader = HeldLease(ctx.leases, s.PLACEMENT_LEADER_KEY, me, ttl)
    # The books must count every run already out before anything is placed: load first, then contend
    # (a long load while holding the lease would let it lapse).
    await view.synced()
    tokens = await record_tokens(ctx)
    while not ctx.stop.is_set():
        try:
            won = await leader.take()
        except JetcronError as exc:  # storage unavailable (a stream leader election): try again, don't die
            ctx.log.warning("placement lease error", error=str(exc))
            won = False
        if not won:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(ctx.stop.wait(), timeout=ttl / 3)
            continue
        started = time.monotonic()
        metrics.child(metrics.TAKEOVERS, kind="placement_leader").inc()
        metrics.child(metrics.LEASES_HELD, kind="placement_leader").set(1)
        view.leading = True
        stop = asyncio.Event()
        placer = Placer(ctx, view, stop, acted=partial(_acted, leader), record_tokens=tokens)
        ctx.log.info("placement leader", replica=me, agents=len(view.cluster), running=len(view.placed),
                     waiting=len(view.scheduled))
        # The records waiting are taken up beside the lease's renewals (hold, below) and the first passes
        tasks = [background(ctx, t) for t in (
            ctx.consumers.consume(s.STREAM_PLACE, s.CONSUMER_PLACEMENT, placer.take, stop=stop, concurrency=1024),
            placer.loop(), placer.held_runs.keep_alive(stop), view.publish_capacity(stop), _take_up(ctx, placer))]
        metrics.child(metrics.TAKEOVER_DURATION, kind="placement_leader").observe(time.monotonic() - started)
        await leader.hold(ctx.stop)
        if not ctx.stop.is_set():
            ctx.log.warning("placement leadership lost", why=leader.why_dropped)
        metrics.child(metrics.LEASES_HELD, kind="placement_leader").set(0)
        view.leading = False
        stop.set()
        for task in tasks[1:]:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        placer.let_go()
        view.drop_in_flight()
        placer.preemptor.put_back()  # after the waiting runs' places are given back: their victims count again


async def record_tokens(ctx: RecordTokensPorts) -> bool:
    """Whether assignments carry their fencing tokens (AssignRun.token), so that an agent may start a run before
    its claim (jetcron.core.lifecycle.leases.claims_late): only where the runs bucket was made from the fencing floor
    (jetcron.bus.topology.FENCED_BUCKETS), whose revisions lie above every lease token its cluster handed out. A
    bucket made before counts from 1, below the claims' revisions its runs' earlier attempts carried: its attempts
    keep those.

    Read once, before the replica contends for the lead, and waited for while the storage does not answer: a
    guess either way could make a run's token go down. Once a cluster's tokens are its records' revisions they stay
    so (for an attempt that claims before its child too, and for an agent of the previous release set to claim
    every attempt first), for a claim's revision may lie below an earlier attempt's record token."""
    while True:
        try:
            return leases.record_tokens((await ctx.streams.state(s.kv_stream(s.BUCKET_RUNS))).starts_at)
        except JetcronError as exc:
            if ctx.stop.is_set():
                return False
            ctx.log.warning("runs bucket not read yet; placement waits for it", error=str(exc))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(ctx.stop.wait(), timeout=1.0)


async def _take_up(ctx: TakeUpPorts, placer: Placer) -> None:
    began = time.monotonic()
    waiting = await placer.follow_records()
    ctx.log.info("placement leader took up the waiting records", waiting=waiting,
                 seconds=round(time.monotonic() - began, 3))


def _acted(leader: HeldLease, now: datetime) -> None:
    """A pass is done: the lease carries it from the next renewal; the first since winning gives the gap."""
    gap = leader.acted(now)
    if gap is not None:
        metrics.child(metrics.TAKEOVER_GAP, kind="placement_leader").observe(gap)


async def main(ctx: Context) -> None:
    view = View(ctx, await open_board(ctx))
    tasks = [background(ctx, t) for t in (view.watch_agents(), view.watch_tenants(), view.expire_agents(),
                                              view.watch_endings(), view.watch_runs(), view.watch_suspects())]
    ctx.ready.set()  # a standby is ready too: its view is warm and the durable consumer exists
    await lead(ctx, view)
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)

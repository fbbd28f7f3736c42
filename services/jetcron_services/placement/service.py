"""The placement service: the leader takes due runs, orders them fairly, fits them, and assigns them."""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import time
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from functools import partial

import msgspec

from jetcron import faults
from jetcron.bus.consume import Drop, Hold, ack_held, touch
from jetcron.bus.direct import Direct
from jetcron.bus.lease import HeldLease
from jetcron.bus.ports import Message
from jetcron.core.errors import JetcronError
from jetcron.core.lifecycle import leases
from jetcron.core.lifecycle.retry import OUTAGE_TRIES, outage_wait
from jetcron.core.lifecycle.run_state import RunEvent
from jetcron.core.lifecycle.runs import Change, apply
from jetcron.core.models import Run
from jetcron.core.placing.demand import waits_from
from jetcron.core.placing.placement import Demand, Placement, Unplaced
from jetcron.core.timing.pacing import TokenBucket, pause_after, walk_on_when_full
from jetcron.telemetry import metrics
from jetcron.telemetry.tracing import context_from_trace_id, messaging_span, tracer
from jetcron.wire import subjects as s
from jetcron.wire.codec import decode, encode
from jetcron.wire.messages import AssignRun, PlaceRun
from jetcron_services.placement.preempt import Preemptor
from jetcron_services.placement.view import View, open_board
from jetcron_services.runtime import Context, background

ASSIGN_CONCURRENCY = 128
REASON_AFTER = timedelta(seconds=1)
"""A run placed within this long of being queued has its waiting reason never written: a backlog behind full
agents cost a fsynced write per run for a reason nobody could read (throughput bench: 8.1 -> 9.6 writes/run)."""
REASONS_PER_SECOND = 64
"""Waiting reasons the leader writes at most per second (a burst of as many), the first in the queue's order
first; the rest are written as the budget comes back, and a run placed before its turn never has one. Unbounded,
a backlog of 100,000 runs behind full agents asked 100,000 writes of the pass that first found them waiting, and
a backlog that stood (every run waiting past REASON_AFTER) a write more for every run, ahead of the assignments
that would drain it (bench/longlife.py)."""
TAKE_UP_BATCH = 2_000
"""Waiting records a new leader takes up between two turns of the event loop (follow_records)."""
TOUCH_EVERY = 10.0
"""Seconds between "still working on it" signals per held PlaceRun: a third of the consumer's 30 s ack wait."""
_tracer = tracer("placement")


class Placer:
    def __init__(self, ctx: Context, view: View, over: asyncio.Event | None = None,
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
        self.record_tokens = record_tokens
        """Whether an assignment carries its fencing token, its `assigned` write's revision (AssignRun.token): the
        runs bucket's revisions lie above every lease token (record_tokens())."""
        self.ahead = timedelta(seconds=ctx.settings.lead_seconds)
        """How long before its due time a held run is assigned (the agent then starts it on time)."""
        # The message is None for a run taken up from its record at takeover (its message is still pending).
        self.held: dict[str, tuple[PlaceRun, Message | None, str]] = {}
        # A herd of thousands of writes at once would queue the leader lease's renewal behind them until it
        # lapsed (seen at 2,000 runs with fsync on); a bounded number in flight keeps the server as busy.
        self.writes = asyncio.Semaphore(ASSIGN_CONCURRENCY)
        self._acking: set[asyncio.Future[None]] = set()
        """Acks of the messages of attempts a newer record replaced (offered() is the watch's plain callback), and
        of the messages of runs assigned, once their assignments are sent."""
        self._sending: dict[str, asyncio.Future[None]] = {}
        """Assignments being handed to their agents (_send), by run: each outlives the pass that made it."""
        self.handoff = Direct(ctx.rpc, "assign", ctx.settings.handoff_timeout)
        """Assignments handed to their agents directly, the stream only for those not taken so (jetcron.bus.direct)."""
        self.preemptor = Preemptor(ctx, view)
        """A run with no place may take that of lower-priority runs whose policy allows it (preempt.py)."""
        self.reasons = TokenBucket.full(REASONS_PER_SECOND, ctx.clock.now().timestamp())
        """Waiting reasons that may be written now (REASONS_PER_SECOND, refilled by the clock)."""
        self.next_due: datetime | None = None
        """When the last pass's nearest demand that was too early to assign comes within `lead` of its due time."""

    async def take(self, msg: Message) -> None:
        """Consumer handler: keep the message unacked while the run waits; ack once it is assigned (at once for
        an attempt already held from its record)."""
        try:
            cmd = decode(msg.data, PlaceRun)
        except Exception as exc:
            raise Drop(f"undecodable PlaceRun: {exc}") from exc
        old = self.held.get(cmd.run_id)
        if old is not None and old[0].attempt == cmd.attempt and old[1] is None:
            # Held from its record, which any leader takes up (follow_records): the message adds nothing to keep,
            # and a backlog of re-driven messages held unacked cost a touch each every 10 s (bench/longlife.py).
            return
        taken, superseded = self._offer(cmd, msg)
        if superseded is not None:
            await ack_held(superseded)
        if not taken:
            return  # a duplicate delivery, or the run is already out: ack it, the held one stands
        raise Hold()

    def _offer(self, cmd: PlaceRun, msg: Message | None) -> tuple[bool, Message | None]:
        """Hold the attempt, unless it (or a newer one) is held or out already: whether it was taken, and the
        message of an older attempt it replaced (for the caller to ack)."""
        old = self.held.get(cmd.run_id)
        if old is not None and old[0].attempt >= cmd.attempt:
            return False, None
        out = self.view.placed.get(cmd.run_id)
        if out is not None and out.attempt >= cmd.attempt:
            return False, None  # already out (a redelivery after takeover, or a re-drive that crossed the assignment)
        superseded = self._unqueue(cmd.run_id) if old is not None else None
        if out is not None:
            self.view.release(cmd.run_id)  # the record moved on from that attempt; its hosts may be gone
        self.hold(cmd, msg)
        return True, superseded

    def hold(self, cmd: PlaceRun, msg: Message | None) -> None:
        self.held[cmd.run_id] = (cmd, msg, "")
        self.view.queue.push(Demand(run_id=cmd.run_id, tenant=cmd.tenant, priority=cmd.priority,
                                    resources=cmd.resources, require=cmd.require, needs=cmd.needs,
                                    enqueued_at=waits_from(self.ctx.clock.now(), cmd.due_at), queue=cmd.queue))
        metrics.child(metrics.QUEUE_DEPTH, priority=cmd.priority.value).inc()
        self.view.changed.set()

    def offered(self, cmd: PlaceRun) -> None:
        """A record waiting for placement, from the runs watch (at takeover, every one the view keeps), as the
        PlaceRun it stands for.

        The record is the hand-off (no PlaceRun comes for it), so the leader holds it at once; a PlaceRun of the
        same attempt, re-driven or from a publisher of the previous release, joins the held entry. A held run
        whose record names another priority or queue (runs.set_priority) moves in the queue, keeping how long it
        has waited."""
        held = self.held.get(cmd.run_id)
        if held is None or held[0].attempt < cmd.attempt:
            self._ack_later(self._offer(cmd, None)[1])
            return
        old, msg, reason = held
        if (old.priority, old.queue) == (cmd.priority, cmd.queue) or old.attempt != cmd.attempt:
            return
        self.held[cmd.run_id] = (msgspec.structs.replace(old, priority=cmd.priority, queue=cmd.queue), msg, reason)
        self.view.queue.reprioritize(cmd.run_id, cmd.priority, cmd.queue)
        metrics.child(metrics.QUEUE_DEPTH, priority=old.priority.value).dec()
        metrics.child(metrics.QUEUE_DEPTH, priority=cmd.priority.value).inc()
        self.view.changed.set()

    def _waits(self, cmd: PlaceRun, now: datetime) -> bool:
        """Too early to assign: a staged first attempt goes at once, others `lead` before their due time."""
        return not cmd.staged and cmd.due_at - self.ahead > now

    def moved_on(self, run_id: str, attempt: int | None) -> None:
        """A held run's record left `scheduled` at its attempt or a later one, not by this leader's assignment
        (that one leaves `held` before it is written): cancelled, or assigned by a deposed leader's last write.
        It leaves the queue now rather than when a pass fails to assign it; it no longer counts as pending."""
        held = self.held.get(run_id)
        if held is not None and (attempt is None or held[0].attempt <= attempt):
            self._ack_later(self._unqueue(run_id))

    def _ack_later(self, msg: Message | None, after: asyncio.Future[None] | None = None) -> None:
        if msg is not None:
            self._acking.add(task := asyncio.ensure_future(_ack_after(msg, after)))
            task.add_done_callback(self._acking.discard)

    def _unqueue(self, run_id: str) -> Message | None:
        """Leave the queue; the message it was held with, for the caller to ack."""
        cmd, msg, _ = self.held.pop(run_id)
        self.view.queue.remove(run_id)
        metrics.child(metrics.QUEUE_DEPTH, priority=cmd.priority.value).dec()
        return msg

    async def follow_records(self) -> int:
        """At takeover: every run whose record waits for placement is held, and each one the runs watch delivers
        from then on (its PlaceRun, if one comes, joins the held entry); how many were waiting at takeover.

        Those already waiting are taken up TAKE_UP_BATCH at a time, the loop let go between: at once, a herd of
        100,000 held it for 0.45 s (bench/placement_memory.py; the design's 950,000 at midnight ~4.3 s, past the
        leader lease's renewal, which was queued behind). A record that leaves `scheduled` meanwhile is not taken
        up."""
        self.view.on_scheduled, self.view.on_moved_on = self.offered, self.moved_on
        waiting = list(self.view.scheduled)
        for done, run_id in enumerate(waiting, 1):
            if (entry := self.view.scheduled.get(run_id)) is not None:
                self.offered(entry.cmd)
            if done % TAKE_UP_BATCH == 0:
                await asyncio.sleep(0)
        return len(waiting)

    def let_go(self) -> None:
        """Leadership lost: the queue keeps policies and quota usage, only the held demands leave it.

        Their messages are not acked: the server redelivers them to the next leader, which holds their records
        already."""
        self.view.on_scheduled = self.view.on_moved_on = None
        for run_id, (cmd, _, _) in list(self.held.items()):
            del self.held[run_id]
            self.view.queue.remove(run_id)
            metrics.child(metrics.QUEUE_DEPTH, priority=cmd.priority.value).dec()

    async def _assign(self, cmd: PlaceRun, placement: Placement, now: datetime) -> int | None:
        """CAS scheduled -> assigned (with the GPU devices), then one AssignRun per host, sent beside the pass
        (_send); the revision written, or None if the run moved on."""
        def decide(run: Run) -> Run | None:
            if run.attempt != cmd.attempt:
                return None
            new = apply(run, Change(event=RunEvent.ASSIGN, agents=placement.agents,
                                    reason=self.preemptor.reason(cmd.run_id)), now)
            if any(placement.gpu_indices.values()):
                new = msgspec.structs.replace(new, gpu_indices=placement.gpu_indices)
            return new

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
        self._sending[run.run_id] = task = asyncio.ensure_future(
            self._send(cmd, run, new, placement, written if self.record_tokens else 0))
        task.add_done_callback(partial(self._sent, run.run_id))
        return written

    def _sent(self, run_id: str, task: asyncio.Future[None]) -> None:
        if self._sending.get(run_id) is task:
            del self._sending[run_id]

    async def sent(self) -> None:
        """Until every assignment made so far has been handed over (or published), and the messages held for
        them acked."""
        while self._sending or self._acking:
            await asyncio.gather(*self._sending.values(), *self._acking)

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

    async def _note_waiting(self, run_id: str, reason: str, now: datetime) -> None:
        if run_id not in self.held:
            return
        cmd, msg, shown = self.held[run_id]
        if reason == shown:
            return
        self.held[run_id] = (cmd, msg, reason)
        with contextlib.suppress(JetcronError):
            async with self.writes:
                await self._write_reason(run_id, cmd, reason, now)

    async def _write_reason(self, run_id: str, cmd: PlaceRun, reason: str, now: datetime) -> None:
        def decide(run: Run) -> Run | None:
            return apply(run, Change(event=RunEvent.WAIT, reason=reason), now) if run.attempt == cmd.attempt else None

        # From the record the runs watch delivered, as _assign does (no read first); one try on the stored record
        await self.ctx.runs.change(run_id, decide, copy=self.view.copy(run_id), tries=2)

    async def place_once(self) -> float:
        """Decide in memory first, then carry out every assignment of this pass concurrently. Returns the
        seconds the deciding took (the part that holds the loop; the writes then awaited leave it free)."""
        began = self.timer()
        now = self.ctx.clock.now()
        view = self.view
        chosen: list[tuple[Demand, Placement]] = []
        waiting: list[tuple[str, str]] = []
        # A pass only takes capacity, so a shape that found no place will not find one later in the pass: with
        # every agent full, a backlog of thousands costs one fit and one reason per shape, not per run.
        unfit: dict[tuple[object, ...], Unplaced] = {}
        unplaced = {False: 0, True: 0}  # demands left waiting, by whether they can never fit: one count per pass
        budget = int(self.reasons.available(now.timestamp()))
        self.preemptor.begin_pass()
        # Lazily, not a list taken first: the fair queue moves a tenant's deficit and its queues' turn only for a
        # demand charged right after it was offered (a list offered every demand before any was charged, so
        # weights and queue turns were never spent: the first tenant and queue were served until they ran dry).
        due: datetime | None = None  # the nearest time a demand seen waits for (its `lead` before due)
        past_full = 0  # demands looked at with no slot free anywhere
        for demand in view.queue.candidates(now):
            held = self.held.get(demand.run_id)
            if held is None:
                view.queue.remove(demand.run_id)
                continue
            if not view.cluster.any_slot() and not self.preemptor.possible():
                # No slot free anywhere and nothing may be preempted: no demand further in the queue can be placed,
                # so the pass ends once the reasons it may write are found, or past the head of the queue, rather
                # than walking the whole backlog (a midnight herd behind a full fleet: 0.32 s per 100,000 waiting,
                # every pass, bench/placement_memory.py). A slot coming free wakes the next pass (view.changed).
                past_full += 1
                if not walk_on_when_full(past_full, budget - len(waiting)):
                    break
            if self._waits(held[0], now):
                at = held[0].due_at - self.ahead
                due = at if due is None else min(due, at)
                continue
            noted = len(waiting) < budget
            shown = noted and now - demand.enqueued_at >= REASON_AFTER
            if (blocked := view.queue.quota_block(demand)) is not None:
                if shown and blocked != held[2]:
                    waiting.append((demand.run_id, blocked))
                continue
            shape = (demand.resources, tuple(sorted(demand.require.items())), tuple(demand.needs))
            result = unfit.get(shape) or view.cluster.place(demand)
            if not isinstance(result, Placement):
                unfit[shape] = result
                # The place lower-priority runs leave when preempted (their preemption is written first: _carry_out)
                room = None if result.unsatisfiable else self.preemptor.make_room(demand, now)
                if room is None:
                    unplaced[result.unsatisfiable] += 1
                    if (shown or (noted and result.unsatisfiable)) and result.reason != held[2]:
                        waiting.append((demand.run_id, result.reason))
                    continue
                result = room
                unfit.pop(shape, None)  # the pass freed capacity: the shape's answer no longer holds
            view.queue.remove(demand.run_id)
            view.queue.charge(demand)
            view.hold(demand, held[0].attempt)
            chosen.append((demand, result))
        self.reasons.take(now.timestamp(), len(waiting))
        self.next_due = due
        for unsatisfiable, count in unplaced.items():
            if count:
                metrics.child(metrics.PLACEMENTS, result="unsatisfiable" if unsatisfiable else "waiting").inc(count)
        decided = self.timer() - began
        await asyncio.gather(*(self._carry_out(d, p, now) for d, p in chosen),
                             *(self._note_waiting(r, why, now) for r, why in waiting))
        return decided

    async def _carry_out(self, demand: Demand, placement: Placement, now: datetime) -> None:
        if not await self.preemptor.clear(demand, now):
            self.view.queue.push(demand)  # a run it was to preempt could not be: it waits for the next pass
            return
        entry = self.held.pop(demand.run_id, None)
        if entry is None:  # its record moved on while the pass cleared its place (moved_on): nothing to assign
            self.preemptor.done(demand.run_id)
            self.view.unhold(demand.run_id)
            return
        cmd, msg, _ = entry
        metrics.child(metrics.QUEUE_DEPTH, priority=cmd.priority.value).dec()
        async with self.writes:
            written = await self._assign(cmd, placement, now)
        self.preemptor.done(demand.run_id)
        if written is not None:
            self.view.assigned(demand.run_id, written)
            metrics.child(metrics.PLACEMENTS, result="placed").inc()
        else:
            self.view.unhold(demand.run_id)
        # Acked once its AssignRun is sent (a placement that dies between the two leaves it to be redelivered)
        self._ack_later(msg, after=self._sending.get(demand.run_id))

    async def keep_alive(self) -> None:
        """Tell the server the held messages are still being worked on, so they are not redelivered.

        Each one every TOUCH_EVERY seconds, counted from when this pass first saw it (it was delivered at most
        one pass earlier), not all of them every pass: a herd holds tens of thousands."""
        touched: dict[str, float] = {}
        while not self.over.is_set():
            await asyncio.sleep(TOUCH_EVERY / 2)
            now = time.monotonic()
            seen: dict[str, float] = {}
            for run_id, (_, msg, _) in list(self.held.items()):
                if msg is None:
                    continue
                last = seen[run_id] = touched.get(run_id, now)
                if now - last >= TOUCH_EVERY:
                    seen[run_id] = now
                    await touch(msg)
            touched = seen

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


async def lead(ctx: Context, view: View) -> None:
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
            placer.loop(), placer.keep_alive(), view.publish_capacity(stop), _take_up(ctx, placer))]
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


async def record_tokens(ctx: Context) -> bool:
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


async def _ack_after(msg: Message, sending: asyncio.Future[None] | None) -> None:
    if sending is not None:
        await asyncio.shield(sending)
    await ack_held(msg)


async def _take_up(ctx: Context, placer: Placer) -> None:
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

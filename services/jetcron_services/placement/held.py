"""The runs the placement leader holds waiting for placement, each with the message it came with (unacked until the
run is assigned), kept in step with the fair queue's demands and the queue-depth metric."""

from __future__ import annotations

import asyncio
import time

import msgspec

from jetcron.bus.consume import Drop, Hold, ack_held, touch
from jetcron.bus.ports import Message
from jetcron.core.placing.demand import waits_from
from jetcron.core.placing.placement import Demand
from jetcron.telemetry import metrics
from jetcron.wire.codec import decode
from jetcron.wire.messages import PlaceRun
from jetcron_services.placement.ports import HeldRunsPorts
from jetcron_services.placement.view import View

TAKE_UP_BATCH = 2_000
"""Waiting records a new leader takes up between two turns of the event loop (follow_records)."""
TOUCH_EVERY = 10.0
"""Seconds between "still working on it" signals per held PlaceRun: a third of the consumer's 30 s ack wait."""

HeldRun = tuple[PlaceRun, Message | None, str]
"""A held run: its PlaceRun, the message it came with, and the waiting reason last written for it. The message is
None for a run taken up from its record at takeover (its message is still pending)."""


class HeldRuns:
    """The leader's held runs by run id, and their demands in the view's fair queue."""

    def __init__(self, ctx: HeldRunsPorts, view: View) -> None:
        self.ctx = ctx
        self.view = view
        self.runs: dict[str, HeldRun] = {}
        self.acking: set[asyncio.Future[None]] = set()
        """Acks of the messages of attempts a newer record replaced (offered() is the watch's plain callback), and
        of the messages of runs assigned, once their assignments are sent."""

    async def take(self, msg: Message) -> None:
        """Consumer handler: keep the message unacked while the run waits; ack once it is assigned (at once for
        an attempt already held from its record)."""
        try:
            cmd = decode(msg.data, PlaceRun)
        except Exception as exc:
            raise Drop(f"undecodable PlaceRun: {exc}") from exc
        old = self.runs.get(cmd.run_id)
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
        old = self.runs.get(cmd.run_id)
        if old is not None and old[0].attempt >= cmd.attempt:
            return False, None
        out = self.view.placed.get(cmd.run_id)
        if out is not None and out.attempt >= cmd.attempt:
            return False, None  # already out (a redelivery after takeover, or a re-drive that crossed the assignment)
        superseded = self.unqueue(cmd.run_id) if old is not None else None
        if out is not None:
            self.view.release(cmd.run_id)  # the record moved on from that attempt; its hosts may be gone
        self.hold(cmd, msg)
        return True, superseded

    def hold(self, cmd: PlaceRun, msg: Message | None) -> None:
        self.runs[cmd.run_id] = (cmd, msg, "")
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
        held = self.runs.get(cmd.run_id)
        if held is None or held[0].attempt < cmd.attempt:
            self.ack_later(self._offer(cmd, None)[1])
            return
        old, msg, reason = held
        if (old.priority, old.queue) == (cmd.priority, cmd.queue) or old.attempt != cmd.attempt:
            return
        self.runs[cmd.run_id] = (msgspec.structs.replace(old, priority=cmd.priority, queue=cmd.queue), msg, reason)
        self.view.queue.reprioritize(cmd.run_id, cmd.priority, cmd.queue)
        metrics.child(metrics.QUEUE_DEPTH, priority=old.priority.value).dec()
        metrics.child(metrics.QUEUE_DEPTH, priority=cmd.priority.value).inc()
        self.view.changed.set()

    def moved_on(self, run_id: str, attempt: int | None) -> None:
        """A held run's record left `scheduled` at its attempt or a later one, not by this leader's assignment
        (that one leaves the held runs before it is written): cancelled, or assigned by a deposed leader's last
        write. It leaves the queue now rather than when a pass fails to assign it; it no longer counts as pending."""
        held = self.runs.get(run_id)
        if held is not None and (attempt is None or held[0].attempt <= attempt):
            self.ack_later(self.unqueue(run_id))

    def note(self, run_id: str, reason: str) -> PlaceRun | None:
        """The held run waits for `reason`: its PlaceRun when that reason is new (to be written), else None."""
        held = self.runs.get(run_id)
        if held is None or held[2] == reason:
            return None
        self.runs[run_id] = (held[0], held[1], reason)
        return held[0]

    def take_out(self, run_id: str) -> HeldRun | None:
        """The run is to be assigned: it is no longer held (its demand left the queue when the pass chose it)."""
        held = self.runs.pop(run_id, None)
        if held is not None:
            metrics.child(metrics.QUEUE_DEPTH, priority=held[0].priority.value).dec()
        return held

    def unqueue(self, run_id: str) -> Message | None:
        """Leave the queue; the message it was held with, for the caller to ack."""
        cmd, msg, _ = self.runs.pop(run_id)
        self.view.queue.remove(run_id)
        metrics.child(metrics.QUEUE_DEPTH, priority=cmd.priority.value).dec()
        return msg

    def ack_later(self, msg: Message | None, after: asyncio.Future[None] | None = None) -> None:
        """Ack the message (once `after`, an assignment being sent, is done), beside the caller."""
        if msg is not None:
            self.acking.add(task := asyncio.ensure_future(_ack_after(msg, after)))
            task.add_done_callback(self.acking.discard)

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
        for run_id, (cmd, _, _) in list(self.runs.items()):
            del self.runs[run_id]
            self.view.queue.remove(run_id)
            metrics.child(metrics.QUEUE_DEPTH, priority=cmd.priority.value).dec()

    async def keep_alive(self, over: asyncio.Event) -> None:
        """Until `over`: tell the server the held messages are still being worked on, so they are not redelivered.

        Each one every TOUCH_EVERY seconds, counted from when this pass first saw it (it was delivered at most
        one pass earlier), not all of them every pass: a herd holds tens of thousands."""
        touched: dict[str, float] = {}
        while not over.is_set():
            await asyncio.sleep(TOUCH_EVERY / 2)
            now = time.monotonic()
            seen: dict[str, float] = {}
            for run_id, (_, msg, _) in list(self.runs.items()):
                if msg is None:
                    continue
                last = seen[run_id] = touched.get(run_id, now)
                if now - last >= TOUCH_EVERY:
                    seen[run_id] = now
                    await touch(msg)
            touched = seen


async def _ack_after(msg: Message, sending: asyncio.Future[None] | None) -> None:
    if sending is not None:
        await asyncio.shield(sending)
    await ack_held(msg)

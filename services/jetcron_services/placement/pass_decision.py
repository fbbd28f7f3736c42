"""What one placement pass decides in memory, before any write: which held runs go where (reserved on the books at
once), and which wait, with the reasons to be written for them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from jetcron.core.placing.placement import Demand, Placement, Unplaced
from jetcron.core.timing.pacing import walk_on_when_full
from jetcron_services.placement.held import HeldRun
from jetcron_services.placement.preempt import Preemptor
from jetcron_services.placement.view import View

REASON_AFTER = timedelta(seconds=1)
"""A run placed within this long of being queued has its waiting reason never written: a backlog behind full
agents cost a fsynced write per run for a reason nobody could read (throughput bench: 8.1 -> 9.6 writes/run)."""


@dataclass
class PassDecision:
    chosen: list[tuple[Demand, Placement]] = field(default_factory=list)
    """The runs given a place, reserved on the books: their assignments are to be written."""
    waiting: list[tuple[str, str]] = field(default_factory=list)
    """Runs left waiting and the reason to write for each, within the pass's budget of reasons."""
    due: datetime | None = None
    """The nearest time a run seen waiting for its due time may be assigned (its `lead` before due)."""
    unplaced: dict[bool, int] = field(default_factory=lambda: {False: 0, True: 0})
    """Demands left waiting, by whether they can never fit: one count per pass."""


def decide(view: View, held: Mapping[str, HeldRun], preemptor: Preemptor, now: datetime, *, ahead: timedelta,
           budget: int) -> PassDecision:
    """Walk the fair queue's candidates: place each held run that is due (`ahead` of its due time) on the books, or
    on what preempting lower-priority runs would leave; note the reasons of up to `budget` of those that wait."""
    decision = PassDecision()
    chosen, waiting, unplaced = decision.chosen, decision.waiting, decision.unplaced
    # A pass only takes capacity, so a shape that found no place will not find one later in the pass: with
    # every agent full, a backlog of thousands costs one fit and one reason per shape, not per run.
    unfit: dict[tuple[object, ...], Unplaced] = {}
    preemptor.begin_pass()
    # Lazily, not a list taken first: the fair queue moves a tenant's deficit and its queues' turn only for a
    # demand charged right after it was offered (a list offered every demand before any was charged, so
    # weights and queue turns were never spent: the first tenant and queue were served until they ran dry).
    due: datetime | None = None
    past_full = 0  # demands looked at with no slot free anywhere
    for demand in view.queue.candidates(now):
        entry = held.get(demand.run_id)
        if entry is None:
            view.queue.remove(demand.run_id)
            continue
        if not view.cluster.any_slot() and not preemptor.possible():
            # No slot free anywhere and nothing may be preempted: no demand further in the queue can be placed,
            # so the pass ends once the reasons it may write are found, or past the head of the queue, rather
            # than walking the whole backlog (a midnight herd behind a full fleet: 0.32 s per 100,000 waiting,
            # every pass, bench/placement_memory.py). A slot coming free wakes the next pass (view.changed).
            past_full += 1
            if not walk_on_when_full(past_full, budget - len(waiting)):
                break
        cmd = entry[0]
        if not cmd.staged and cmd.due_at - ahead > now:  # too early: a staged first attempt goes at once
            at = cmd.due_at - ahead
            due = at if due is None else min(due, at)
            continue
        noted = len(waiting) < budget
        shown = noted and now - demand.enqueued_at >= REASON_AFTER
        if (blocked := view.queue.quota_block(demand)) is not None:
            if shown and blocked != entry[2]:
                waiting.append((demand.run_id, blocked))
            continue
        shape = (demand.resources, tuple(sorted(demand.require.items())), tuple(demand.needs))
        result = unfit.get(shape) or view.cluster.place(demand)
        if not isinstance(result, Placement):
            unfit[shape] = result
            # The place lower-priority runs leave when preempted (their preemption is written first: _carry_out)
            room = None if result.unsatisfiable else preemptor.make_room(demand, now)
            if room is None:
                unplaced[result.unsatisfiable] += 1
                if (shown or (noted and result.unsatisfiable)) and result.reason != entry[2]:
                    waiting.append((demand.run_id, result.reason))
                continue
            result = room
            unfit.pop(shape, None)  # the pass freed capacity: the shape's answer no longer holds
        view.queue.remove(demand.run_id)
        view.queue.charge(demand)
        view.hold(demand, cmd.attempt)
        chosen.append((demand, result))
    decision.due = due
    return decision

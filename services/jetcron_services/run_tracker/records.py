"""Apply a change to a stored run by compare-and-set, then carry out what the new state implies."""

from __future__ import annotations

import random
from collections.abc import Callable

from jetcron.core.lifecycle import retry
from jetcron.core.lifecycle.notify import with_missed
from jetcron.core.lifecycle.runs import Change, apply
from jetcron.core.models import Run, RunState
from jetcron.telemetry import metrics
from jetcron.wire import subjects as s
from jetcron.wire.codec import encode
from jetcron.wire.messages import DeadLettered
from jetcron_services.run_tracker.deadlines import announce_missed
from jetcron_services.runtime import Context

MAX_CAS_TRIES = 8


class Records:
    """Every tracker write goes through here: read, decide with apply(), CAS, then side effects."""

    def __init__(self, ctx: Context, rng: random.Random, on_terminal: Callable[[Run], object] | None = None) -> None:
        self.ctx = ctx
        self.rng = rng
        self.on_terminal = on_terminal
        self.known: Callable[[str], tuple[Run, int] | None] = lambda _: None
        """The record and revision the runs watch last delivered, if this replica keeps it (the reconciler)."""

    def with_retry(self, run: Run, change: Change) -> Change:
        """Fill in the retry decision for failure-like events (pure, from the run's history)."""
        from jetcron.core.lifecycle.run_state import RunEvent

        if change.event is RunEvent.FAIL or (change.event is RunEvent.LOSE and run.state is RunState.RUNNING):
            outcome = change.outcome or ("lost" if change.event is RunEvent.LOSE else "failed")
            decision = retry.decide(run, outcome, change.exit_code, self.rng, change.reason)
            return Change(**{**{f: getattr(change, f) for f in change.__struct_fields__}, "retry": decision,
                             "outcome": outcome})
        return change

    async def change(self, run_id: str, make: Callable[[Run], Change | list[Change] | None]) -> Run | None:
        """Compare-and-set `make`'s changes, starting from the copy the runs watch delivered (`known`, see
        Store.change); `make` may return None to give up quietly and must keep no state between calls.

        Several changes (a quick run's start and finish) are applied in order and written once.
        """
        def decide(run: Run) -> Run | None:
            changes = make(run)
            if changes is None:
                return None
            new, now = run, self.ctx.clock.now()
            for change in changes if isinstance(changes, list) else [changes]:
                new = apply(new, self.with_retry(new, change), now)
            # A start or an end past its deadline is recorded in the same write (the sweep sees only live runs).
            return with_missed(new, new.spec, now)

        done = await self.ctx.runs.change(run_id, decide, copy=self.known(run_id), tries=MAX_CAS_TRIES)
        if done is None:
            return None
        old, new, _ = done
        await self.after(old, new)
        return new

    async def after(self, old: Run, new: Run) -> None:
        """Side effects that follow a successful write; each is idempotent (message ids, KV create)."""
        if len(new.missed) > len(old.missed):
            await announce_missed(self.ctx, new, new.missed[len(old.missed):])
        if new.state is RunState.SCHEDULED and new.attempt > old.attempt:
            metrics.RETRIES.inc()  # its `scheduled` record is its hand-off to placement
        if new.state is RunState.DEAD:
            metrics.DEAD_LETTERED.inc()
            await self.ctx.publisher.publish(s.dlq_subject(new.job), DeadLettered(
                run_id=new.run_id, job=new.job, reason=new.reason, run=encode(new), at=self.ctx.clock.now()),
                msg_id=s.msg_id(new.run_id, new.attempt, "dlq"))
        if new.state.terminal and not old.state.terminal:
            metrics.child(metrics.RUNS_FINISHED, outcome=new.state.value).inc()
            if self.on_terminal is not None:
                result = self.on_terminal(new)
                if hasattr(result, "__await__"):
                    await result

"""Apply a change to a stored run by compare-and-set, then carry out what the new state implies."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

from jetcron.core.lifecycle import retry
from jetcron.core.lifecycle.notify import with_missed
from jetcron.core.lifecycle.runs import Change, apply
from jetcron.core.models import Run, RunState
from jetcron_services.run_tracker.hooks import RunHook
from jetcron_services.run_tracker.hooks.dead_letters import DeadLetters
from jetcron_services.run_tracker.hooks.deadlines import MissedDeadlines
from jetcron_services.run_tracker.hooks.run_metrics import RunMetrics
from jetcron_services.run_tracker.ports import RecordsPorts, StandardHooksPorts

MAX_CAS_TRIES = 8


def standard_hooks(ctx: StandardHooksPorts) -> list[RunHook]:
    """What follows every write, in any tracker: misses announced, metrics counted, dead letters published."""
    return [MissedDeadlines(ctx), RunMetrics(), DeadLetters(ctx)]


class Records:
    """Every tracker write goes through here: read, decide with apply(), CAS, then the hooks."""

    def __init__(self, ctx: RecordsPorts, rng: random.Random, hooks: Sequence[RunHook] | None = None) -> None:
        self.ctx = ctx
        self.rng = rng
        self.hooks = list(standard_hooks(ctx) if hooks is None else hooks)
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
        """What follows a successful write: each hook in order (jetcron_services.run_tracker.hooks)."""
        for hook in self.hooks:
            await hook.changed(old, new)

"""The attempts on this agent: the newest of each run (what the agent counts as its own, and what they take), every
one not ended yet by run and by GPU device (what a new one must not overlap), and those ended lately."""

from __future__ import annotations

import time
from typing import TypeVar

from jetcron.core.lifecycle.ended import Ended
from jetcron.core.placing.agents_index import Used
from jetcron.telemetry import metrics
from jetcron_services.agent.attempt import Attempt

_K = TypeVar("_K", str, int)


class HeldAttempts:
    """Kept as attempts come and go: `hold` as one starts, `let_go` as it ends."""

    def __init__(self) -> None:
        self.attempts: dict[str, Attempt] = {}
        """The newest attempt of each run here, until it ends."""
        self.live: dict[str, list[Attempt]] = {}
        """Every attempt not ended yet by run id, a superseded one too (`attempts` keeps the newest of a run)."""
        self.on_devices: dict[int, list[Attempt]] = {}
        """The attempts not ended yet that were given each GPU device."""
        self.used = Used()
        """What the attempts in `attempts` take, kept as they come and go: summing them at every heartbeat
        walked a staged herd of tens of thousands."""
        self.ended = Ended()
        """Attempts that ended here lately: an assignment redelivered after one (its ack lost) is not run again."""

    def hold(self, attempt: Attempt) -> None:
        """Count an attempt as this agent's (a superseded one of the same run is simply replaced), not ended yet."""
        old = self.attempts.get(attempt.cmd.run_id)
        if old is not None:
            self.used = self.used.minus(old.cmd.spec.resources)
        self.attempts[attempt.cmd.run_id] = attempt
        self.used = self.used.plus(attempt.cmd.spec.resources)
        metrics.AGENT_RUNNING.set(len(self.attempts))
        self.index(attempt, True)

    def index(self, attempt: Attempt, alive: bool) -> None:
        """Index an attempt as not ended yet (alive), or drop it: it has ended."""
        _index(self.live, attempt.cmd.run_id, attempt, alive)
        for g in attempt.cmd.gpu_indices:
            _index(self.on_devices, g, attempt, alive)

    def let_go(self, attempt: Attempt) -> None:
        """The attempt has ended: it is remembered as ended, and no longer counted (unless a newer one replaced it)."""
        self.index(attempt, False)
        if self.attempts.get(attempt.cmd.run_id) is attempt:
            del self.attempts[attempt.cmd.run_id]
            self.used = self.used.minus(attempt.cmd.spec.resources)
        self.ended.add(attempt.cmd.run_id, attempt.cmd.attempt, time.monotonic())
        metrics.AGENT_RUNNING.set(len(self.attempts))

    def stopping_near(self, attempt: Attempt) -> Attempt | None:
        """An attempt the given one must not overlap that is still being stopped here (an older attempt of its run,
        or one given any of its GPU devices); None when there is none."""
        near = [*self.live.get(attempt.cmd.run_id, ()),
                *(a for g in attempt.cmd.gpu_indices for a in self.on_devices.get(g, ()))]
        return next((a for a in near if a is not attempt and a.stopping), None)

    def bound_to(self, nonce: str) -> list[Attempt]:
        """Every attempt not ended yet whose claim is bound to the agent lease of `nonce` (none for "")."""
        return [attempt for attempts in list(self.live.values()) for attempt in list(attempts)
                if nonce and attempt.claim.bound == nonce]


def _index(index: dict[_K, list[Attempt]], key: _K, attempt: Attempt, add: bool) -> None:
    if add:
        index.setdefault(key, []).append(attempt)
        return
    found = index.get(key)
    if found is not None and attempt in found:
        found.remove(attempt)
        if not found:
            del index[key]

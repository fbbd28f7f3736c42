"""Attempts an agent has ended lately, pure: a redelivered assignment of one of them is not run again.

An agent acks an assignment once the attempt is under way; an ack lost with a NATS node brings the
assignment back after the consumer's ack wait, when the attempt has long ended and released its lease, so
the lease alone lets it run a second time (the chaos suite's killed runs-bucket leader: attempt 1 executed
twice, with two fencing tokens). The agent's own memory of what it ran closes that window; a redelivery
can only come to the agent it was sent to (one assignment subject per agent).
"""

from __future__ import annotations

from collections import OrderedDict

KEEP_S = 600.0
"""Seconds an ended attempt is remembered: a lost ack redelivers after the ack wait (30 s), a lost second
one after twice that; ten minutes is many of them."""
MAX_KEPT = 200_000
"""Enough for two herds of 100,000 runs on one sim agent; past it the oldest go first (bounded memory)."""


class Ended:
    """run id -> the newest attempt of it that ended here, forgotten `keep` seconds after it ended."""

    def __init__(self, keep: float = KEEP_S, max_kept: int = MAX_KEPT) -> None:
        self.keep = keep
        self.max_kept = max_kept
        self._ended: OrderedDict[str, tuple[int, float]] = OrderedDict()

    def add(self, run_id: str, attempt: int, now: float) -> None:
        old = self._ended.pop(run_id, None)
        self._ended[run_id] = (max(attempt, old[0]) if old else attempt, now)
        self._forget(now)

    def ran(self, run_id: str, attempt: int, now: float) -> bool:
        """Whether this attempt of the run (or a newer one) already ended here."""
        self._forget(now)
        seen = self._ended.get(run_id)
        return seen is not None and seen[0] >= attempt

    def __len__(self) -> int:
        return len(self._ended)

    def _forget(self, now: float) -> None:
        # Oldest first (insertion order is end order): stop at the first one still kept.
        while self._ended:
            run_id, (_, at) = next(iter(self._ended.items()))
            if len(self._ended) <= self.max_kept and now - at < self.keep:
                return
            del self._ended[run_id]

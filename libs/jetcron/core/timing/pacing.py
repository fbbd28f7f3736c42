"""Pacing, pure: how long a leader leaves its event loop free after a pass, and token buckets for work done at a
bounded rate. Timed by the caller's clock."""

from __future__ import annotations

import math
from dataclasses import dataclass

SLOW_PASS = 0.05
"""Seconds: after a pass whose deciding took longer, the leader waits as long before the next one, so that a long
queue leaves half the loop to the watches, the acks and the lease renewal (a pass over 100,000 waiting runs takes
most of a second, and back-to-back passes held the loop until the leader lease lapsed). Only the deciding counts,
the part that holds the loop: while the pass awaits its writes the loop is free, and a wait as long as those
writes halved the rate of a pass bound by them (with a backlog, runs stood queued while agents ran nothing)."""
PAUSE_MAX = 0.5
"""Seconds: the longest wait after one pass, however long it decided (the next pass must still come soon)."""
WALK_PAST_FULL = 2_048
"""Demands a placement pass looks at, once no slot is free anywhere and nothing may be preempted, for their waiting
reasons: the runs nearest their turn have one, and one further back gets its reason as it comes this near. Walking
on until the reasons' budget was spent, a standing backlog's pass walked every run already given a reason, 64 more
each second: at the design's midnight, most of 950,000 within hours."""


def pause_after(deciding: float) -> float:
    """Seconds to wait after a pass that held the loop `deciding` seconds: none after a quick one."""
    return min(deciding, PAUSE_MAX) if deciding > SLOW_PASS else 0.0


def walk_on_when_full(looked: int, reasons_left: int) -> bool:
    """Whether a pass goes on past a demand when none can be placed (no slot free, nothing preemptible): only for
    reasons still to write, and at most WALK_PAST_FULL demands past that point (`looked` counts them)."""
    return reasons_left > 0 and looked <= WALK_PAST_FULL


@dataclass
class TokenBucket:
    """`rate` actions per second on average (a tenant's submits, placement's waiting reasons), bursts of up to
    `burst` (at least 1). The clock is the caller's, in seconds."""

    rate: float
    burst: float
    tokens: float
    at: float

    @classmethod
    def full(cls, rate: float, now: float) -> TokenBucket:
        burst = max(1.0, rate)
        return cls(rate=rate, burst=burst, tokens=burst, at=now)

    def available(self, now: float) -> float:
        """The tokens there now: refilled for the time since the last look, never past the burst."""
        self.tokens = min(self.burst, self.tokens + max(0.0, now - self.at) * self.rate)
        self.at = now
        return self.tokens

    def take(self, now: float, n: float = 1.0) -> float:
        """0 if `n` tokens were taken, else the seconds until they would be there (nothing taken)."""
        if self.available(now) >= n:
            self.tokens -= n
            return 0.0
        return (n - self.tokens) / self.rate if self.rate > 0 else math.inf

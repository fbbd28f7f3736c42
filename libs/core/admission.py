"""Admission control, pure: a token bucket per tenant for submits, and the verdicts that refuse work the
system cannot take now (docs/guarantees.md: back-pressure). The clock is the caller's."""

from __future__ import annotations

import math
from dataclasses import dataclass

from jetcron.core.errors import RateLimited, Unavailable

FULL = 0.9
"""A queue stream this full (of its max messages) refuses new work: the rest is headroom for what is in flight
(retries, re-dispatches), so accepted work never meets a stream that refuses it."""


@dataclass
class TokenBucket:
    """`rate` submits per second on average, bursts of up to `burst` (at least 1)."""

    rate: float
    burst: float
    tokens: float
    at: float

    @classmethod
    def full(cls, rate: float, now: float) -> TokenBucket:
        burst = max(1.0, rate)
        return cls(rate=rate, burst=burst, tokens=burst, at=now)

    def take(self, now: float, n: float = 1.0) -> float:
        """0 if `n` tokens were taken, else the seconds until they would be there (nothing taken)."""
        self.tokens = min(self.burst, self.tokens + max(0.0, now - self.at) * self.rate)
        self.at = now
        if self.tokens >= n:
            self.tokens -= n
            return 0.0
        return (n - self.tokens) / self.rate if self.rate > 0 else math.inf


def check_rate(tenant: str, wait: float) -> None:
    if wait > 0:
        raise RateLimited(f"tenant {tenant} is over its submit rate; retry in {wait:.2f}s", retry_after=wait)


def check_pending(tenant: str, pending: int, limit: int | None, adding: int = 1) -> None:
    if limit is not None and pending + adding > limit:
        raise RateLimited(f"tenant {tenant} has {pending} runs waiting for placement (its limit is {limit}); "
                          "retry when some have started", retry_after=5.0)


def check_queue(stream: str, messages: int, max_messages: int) -> None:
    if max_messages > 0 and messages >= FULL * max_messages:
        raise Unavailable(f"the {stream} queue is full ({messages} of {max_messages}): the system is not "
                          "keeping up; retry later")

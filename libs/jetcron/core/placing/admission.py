"""Admission control, pure: the verdicts that refuse work the system cannot take now (docs/guarantees.md:
back-pressure). A tenant's submit rate is a jetcron.core.timing.pacing.TokenBucket."""

from __future__ import annotations

from jetcron.core.errors import RateLimited, Unavailable

FULL = 0.9
"""A queue stream this full (of its max messages) refuses new work: the rest is headroom for what is in flight
(retries, re-dispatches), so accepted work never meets a stream that refuses it."""


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

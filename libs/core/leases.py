"""Run lease timing, pure: how long an attempt takes its lease for, when it renews, when it fences itself.

Times are seconds on one monotonic clock (the agent's); `written` is when the lease write was sent, so the
server's expiry (judged from its own receipt of the write) is never earlier than `written + granted`.
"""

from __future__ import annotations

from datetime import datetime


def first_grant(ttl: float, due_at: datetime, now: datetime) -> float:
    """The first lease of an attempt: the TTL, plus the wait when the run was assigned ahead of its due time.

    A herd staged seconds ahead would otherwise renew every lease every TTL/3 while it waits (10,000 staged
    runs: 3,000 writes/s on one agent, which then starts them late). A cancel reaches a waiting attempt by
    its control message; if that is lost, the first renewal (TTL/3 after the due time) finds the lease
    revoked, the same bound as for a running attempt.
    """
    return ttl + max(0.0, (due_at - now).total_seconds())


def renew_at(written: float, granted: float, ttl: float) -> float:
    """TTL/3 into a plain lease; for a staged run's first lease, TTL/3 after its due time."""
    return written + granted - 2 * ttl / 3


def fence_at(written: float, granted: float, ttl: float) -> float:
    """The last moment the child may run without a renewal: a margin before the lease can have expired."""
    return written + granted - max(0.5, min(2.0, ttl / 5))

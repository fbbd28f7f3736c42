"""Run lease timing, pure: how long an attempt takes its lease for, when it renews, when it fences itself.

Times are seconds on one monotonic clock (the agent's); `written` is when the lease write was sent, so the
server's expiry (judged from its own receipt of the write) is never earlier than `written + granted`.
"""

from __future__ import annotations

from datetime import datetime


def first_grant(ttl: float, due_at: datetime, now: datetime, queued: int = 0, start_rate: float = 500.0) -> float:
    """The first lease of an attempt: the TTL, plus the wait when the run was assigned ahead of its due time.

    A herd staged seconds ahead would otherwise renew every lease every TTL/3 while it waits (10,000 staged
    runs: 3,000 writes/s on one agent, which then starts them late). A cancel reaches a waiting attempt by
    its control message; if that is lost, the first renewal (TTL/3 after the due time) finds the lease
    revoked, the same bound as for a running attempt.

    A staged attempt also gets its place in the agent's queue: `queued` attempts already wait there and may
    all be due at the same instant, and the agent starts them at about `start_rate` per second. The last of
    50,000 on one agent starts some 100 s late; its lease must not lapse first (the agent would then have to
    fence it, and the tracker would re-dispatch it). The price: if the agent dies, its staged runs are
    re-dispatched that much later.
    """
    wait = max(0.0, (due_at - now).total_seconds())
    return ttl + wait + (queued / start_rate if wait > 0 else 0.0)


def renew_at(written: float, granted: float, ttl: float) -> float:
    """TTL/3 into a plain lease; for a staged run's first lease, TTL/3 after its due time."""
    return written + granted - 2 * ttl / 3


def fence_at(written: float, granted: float, ttl: float) -> float:
    """The last moment the child may run without a renewal: a margin before the lease can have expired."""
    return written + granted - max(0.5, min(2.0, ttl / 5))


REPORT_RENEW_SLACK = 30.0
"""How long before its expiry an ended attempt's lease is renewed, at most (half the lease, at least 2 TTL/3)."""
REPORT_WAIT_CAP = 300.0
"""The most seconds a finished attempt's lease is extended for its report's wait: if its agent dies meanwhile,
the run is re-dispatched at most this much later than with a plain lease."""
REPORT_RATE_FLOOR = 20.0
"""Reports per second assumed when the agent has not measured its own rate yet (or it is lower)."""


def reporting_grant(ttl: float, queued: int, rate: float | None) -> float:
    """The lease of an attempt whose process has ended and whose report waits in the agent's queue: the TTL
    plus that queue's wait at the rate the agent's reports are being acked (`rate`, per second; None: unknown).

    Until the report lands, the lease is what keeps the tracker from calling the run lost (its record still
    says assigned or running) and running it again. A finished attempt has no child left to fence, so the
    lease need not be short: renewed every TTL/3 instead, the 100,000 finished attempts of a herd waiting
    minutes for the tracker wrote hundreds of renewals a second, which slowed the reports they waited for.
    """
    return ttl + min(REPORT_WAIT_CAP, queued / max(rate or 0.0, REPORT_RATE_FLOOR))


def reporting_renew_at(written: float, granted: float, ttl: float) -> float:
    """When the lease of an attempt that has ended (and waits to report) is renewed: well before it could expire.

    Its renewal is due right after a herd's instant, when the server answers slowest; with the 2 TTL/3 of a
    running attempt, renewals that took longer than that landed after the lease had lapsed (the tracker then ran
    the run again). Its child is gone, so nothing is fenced by waiting: up to REPORT_RENEW_SLACK of room.
    """
    return written + granted - max(2 * ttl / 3, min(REPORT_RENEW_SLACK, granted / 2))

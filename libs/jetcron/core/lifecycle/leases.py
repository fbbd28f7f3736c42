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



def outlasting(ttl: float, older_until: float, now: float) -> float:
    """The TTL for a write to a run lease while an older claim by another writer may still be stored (until
    `older_until`, monotonic seconds; 0 when none): at least `ttl`, and a second past that claim.

    A run lease is stored as one claim per writer, and the last one is the lease (subjects.lease_subject). If
    the newest claim expired first (a quick run's one-second release marker), a fenced holder's older claim
    would become the last again and its next renewal would pass: so every claim written over another one
    outlives it, and the last claim always outlives every older one.
    """
    return max(ttl, older_until - now + 1.0)


def foreign_claim(writer: str, holder: str, attempt: int, assigned: str | None, current: int) -> bool:
    """A live run-lease claim no honest agent writes: under a holder name other than its writer's (the writer is
    what the server's permissions vouch for), or on the run's current attempt or a later one by an agent that
    attempt was not placed on. An older attempt's claim by its own agent is honest: its release may still be
    to come. Claims from before writers were named (`writer` empty) are judged by their holder alone."""
    if not writer:
        return False
    return writer != holder or (attempt >= current and writer != assigned)


def fencing_floor(now: datetime) -> int:
    """Where a lease bucket's sequence (its revisions: the fencing tokens) starts: `now` in microseconds since
    the epoch. A bucket deleted and made again must hand out tokens above every token of the one before; they
    are below this while the earlier bucket took fewer writes than microseconds passed since it was made (no
    JetStream stream takes a million writes a second), and it stays under 2^53 (JSON numbers) for another two
    centuries."""
    return int(now.timestamp()) * 1_000_000 + now.microsecond


def record_tokens(runs_start_at: int) -> bool:
    """Whether an attempt's fencing token may be its run record's `assigned` revision: only where the runs bucket
    was made to start at the fencing floor (`runs_start_at`, its first sequence; 0 for one made from 1), so that
    its revisions lie above every lease token its cluster handed out."""
    return runs_start_at > 0


CLAIM_WITHIN = 10.0
"""Seconds from its hand-over within which an attempt started before its claim must have written it, or stop."""


def claim_by(handed_at: float, assign_stall: float) -> float:
    """When an attempt started before its claim (monotonic, from `handed_at`) stops if its claim is not written
    yet: CLAIM_WITHIN, and never later than half the tracker's assignment stall, after which the tracker would
    judge the attempt never started and may hand the run to another."""
    return handed_at + min(CLAIM_WITHIN, assign_stall / 2)


def claims_late(*, direct: bool, token: int, due_at: datetime, now: datetime) -> bool:
    """Whether an attempt starts before its claim is written, claiming only once it has gone on for a while
    (services/jetcron_services/agent/attempt.START_REPORT_DELAY): a run that ends sooner writes none; any other
    claims before its child starts.

    Only where nothing else needs the claim first: its fencing token came with the assignment (the child's
    environment carries it from the start; `token`), it was handed over directly, just after it was written
    (from the stream it may have waited for a slot any time, so its claim is what tells it whether it is still
    the run's), and it is due (a staged run's claim is what covers its wait). Its liveness is its agent's lease,
    which fences it while unclaimed; a gang member, whose lease is its own, is never asked."""
    return direct and token > 0 and due_at <= now

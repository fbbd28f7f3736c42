"""What a lease is: its stored value, a stop notice it may carry, and the lease a holder keeps."""

from __future__ import annotations

from datetime import datetime

import msgspec

from jetcron.wire import subjects as s


class Stop(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """One attempt an agent is told to stop (a cancel, a preemption), carried by a stop notice on its agent lease."""

    run_id: str
    attempt: int
    reason: str
    grace_seconds: float | None = None
    at: float = 0.0
    """When the notice was written (the writer's wall clock, epoch seconds): a notice keeps only recent stops."""


class LeaseValue(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    holder: str
    """Who holds it; empty once released or revoked."""
    attempt: int = 0
    at: datetime | None = None
    revoked: str = ""
    """Set when a third party (cancel, a newer attempt) took the lease away: why."""
    nonce: str = ""
    """Random per acquisition, kept by its renewals: the stored lease carrying ours proves the last write was
    one of ours (a renewal whose ack was lost), never another process's of the same name, nor a revoke."""
    acted_at: datetime | None = None
    """A leader or shard lease: the holder's last real action (a placement pass, a sweep, a fire pass), by its
    wall clock, carried by each renewal and by its release marker; the next holder measures the takeover gap
    from it (jetcron.core.lifecycle.takeover). None on run leases, and until the holder has acted."""
    bound: str = ""
    """A run claim bound to its agent's lease (liveness per agent): that lease's nonce. The claim is alive while the
    agent's lease still carries this nonce, whatever the claim's own (long) TTL says; "" for a claim that is its
    own liveness (renewed every TTL/3), a gang member's and every other lease."""
    stops: tuple[Stop, ...] = ()
    """A stop notice on an agent lease (written by a revoker): attempts that agent must stop. Its next renewal
    fails its revision check, finds the notice and stops them, so a lost control message still stops them."""


class Lease(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """One per attempt an agent holds (a staged herd: tens of thousands): plain data, untracked
    (jetcron.core.models.stored_format)."""

    key: str
    token: int
    """The revision of the write that granted or renewed it: the fencing token."""
    value: LeaseValue
    written_at: datetime | None = None
    """Server time of that write, when read back: the lease expires `ttl` after it (by the server's clock)."""
    ttl: float | None = None
    """The TTL that write carried (its Nats-TTL header), when read back: a staged run's first lease is granted
    for its wait too (jetcron.core.lifecycle.leases.first_grant), so the run lease TTL alone would say it lapsed
    long ago."""
    writer: str = ""
    """A run lease: whose claim this is, from its subject (subjects.lease_writer), which the server's
    permissions vouch for; the holder inside the value is only what the writer said."""
    outlast: float = 0.0
    """Monotonic time until which an older claim by another writer may still be stored: our writes outlive it
    (jetcron.core.lifecycle.leases.outlasting)."""


def unclaimed(key: str, holder: str, attempt: int, bound: str) -> Lease:
    """An attempt's claim not written yet (jetcron.core.lifecycle.leases.claims_late): token 0, nothing stored; `bound`
    to the agent lease that fences it meanwhile."""
    return Lease(key=key, token=0, value=LeaseValue(holder=holder, attempt=attempt, bound=bound),
                 writer=writer_of(key, holder))


def writer_of(key: str, holder: str) -> str:
    """Whose claim a lease we wrote is (a run lease); "" for a lease stored as one subject."""
    return holder if s.by_claims(key) else ""

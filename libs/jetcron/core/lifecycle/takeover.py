"""The takeover gap, pure: how long a leader's or a shard's work went undone while its lease changed hands.

The holder of a leader or shard lease stamps the time of its last real action (a placement pass, a reconciler
sweep, a fire pass) in every renewal and in its release marker (`jetcron.bus.lease.LeaseValue.acted_at`). The next
holder measures from that stamp to its own first action: the outage as the work saw it, the lease's TTL and the
new holder's start-up included, where "lease won -> serving" (jetcron_takeover_duration_seconds) sees only the
start-up.

An expired lease leaves nothing on the server (no delete marker in jc_leaders), so the stamp must be read before
it lapses: a contender remembers what it saw while the lease was still held (a `Sighting`), with when it saw it
on its own monotonic clock. Both stamps are wall clocks of two hosts: their skew enters the figure, which is
therefore clamped to [0, MAX_GAP] rather than trusted to the millisecond.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from datetime import datetime

import msgspec

MAX_GAP = 3600.0
"""No gap is reported above an hour: beyond that the figure says more about the hosts' clocks (or a holder that
kept its lease while doing nothing, which the figure still shows as an hour) than about the takeover, and one
absurd value (a clock set years off) would swamp the histogram's sum."""


class Sighting(msgspec.Struct, frozen=True):
    """A holder's lease as a contender last saw it: the holder's last action (None when it stamped none), and when
    it was seen (the contender's monotonic seconds)."""

    acted_at: datetime | None
    seen_at: float


def gap(last_acted: datetime, first_action: datetime) -> float:
    """Seconds from the previous holder's last action to the new holder's first, clamped to [0, MAX_GAP]: clock
    skew between the two hosts can make it negative, and a gap never is."""
    return min(MAX_GAP, max(0.0, (first_action - last_acted).total_seconds()))


def fresh(sighting: Sighting, now: float, ttl: float) -> bool:
    """Whether a lease seen at `sighting.seen_at` can be the one just taken over at `now` (monotonic seconds).

    Its last write came before we saw it, so it lapsed at most `ttl` later (rounded up to a whole second on the
    wire, jetcron.bus.lease.ServerLeaseLog), and a contender tries at least every ttl/3: a sighting older than 2 x ttl
    (and that second) is of some earlier tenure, and a gap measured from it would count time the lease was held.
    """
    return now - sighting.seen_at <= 2 * ttl + 1.0


def previous_action(written_over: datetime | None, sighting: Sighting | None, now: float, ttl: float
                    ) -> datetime | None:
    """When the previous holder last acted, as the new holder knows it on winning: the stamp of the release marker
    it wrote over (a clean hand-over), else that of the last holder it saw while the lease was held, if that is
    recent enough to be the holder it replaced; None when unknown (a first start: no gap is reported)."""
    if written_over is not None:
        return written_over
    if sighting is not None and sighting.acted_at is not None and fresh(sighting, now, ttl):
        return sighting.acted_at
    return None


def last_of_departed(seen: Mapping[str, Sighting], present: Collection[str], now: float, ttl: float
                     ) -> datetime | None:
    """The latest last action among peers seen recently that are no longer present: whom a shard just found free
    belonged to. Trigger shards are taken by replicas that do not contend for them while they are held (each
    holds its share), so the dead holder's shard leases are never read; its membership lease, read by every
    peer, lapses with them and carries the same stamp. The latest stamp when several left at once: the smaller
    gap, never one longer than what any of them left undone."""
    stamps = [x.acted_at for peer, x in seen.items()
              if peer not in present and x.acted_at is not None and fresh(x, now, ttl)]
    return max(stamps, default=None)


def forget_departed(seen: dict[str, Sighting], present: Collection[str], now: float, ttl: float) -> None:
    """Drop peers gone long enough that no shard of theirs can still be free (their sightings are stale)."""
    for peer in [p for p, x in seen.items() if p not in present and not fresh(x, now, ttl)]:
        del seen[peer]

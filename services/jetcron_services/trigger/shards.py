"""Shard ownership: each shard held by one replica through a KV lease; replicas balance among themselves."""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from datetime import datetime

import structlog

from jetcron.bus.lease import HeldLease, Leases
from jetcron.core.errors import JetcronError
from jetcron.core.ids import stable_fraction
from jetcron.core.lifecycle import takeover
from jetcron.telemetry import metrics
from jetcron.wire import subjects as s

log = structlog.get_logger("jetcron.trigger.shards")


class ShardOwner:
    """Holds this replica's fair share of shard leases, and its membership; balance() is called every TTL/3."""

    def __init__(self, leases: Leases, replica: str, shards: int, ttl: float) -> None:
        self.leases = leases
        self.replica = replica
        self.shards = shards
        self.ttl = ttl
        self.owned: dict[int, HeldLease] = {}
        self.member = HeldLease(leases, s.trigger_member_key(replica), replica, ttl)
        self.acted_at: datetime | None = None
        """The end of our last fire pass: every lease we renew carries it (the next holder's takeover gap)."""
        self.unserved: set[int] = set()
        """Shards won that no fire pass has served yet: the first one measures the takeover gap."""
        self.peers: dict[str, takeover.Sighting] = {}
        """Other replicas' membership leases as last read. A dead replica's shard leases lapse with nothing left to
        read, and no peer contends for them while they are held (each holds its share): its membership lease,
        read at each balance, lapses with them and carries the same stamp
        (jetcron.core.lifecycle.takeover.last_of_departed)."""

    @property
    def shard_ids(self) -> set[int]:
        return set(self.owned)

    async def _members(self) -> set[str]:
        members = set(await self.leases.keys(s.TRIGGER_MEMBERS))
        await asyncio.gather(*(self._sight(key) for key in members if key != self.member.key))
        return members

    async def _sight(self, key: str) -> None:
        with contextlib.suppress(JetcronError):  # a sighting is for the figure only: a failed read is no failure
            lease = await self.leases.read(key)
            if lease is not None and lease.value.holder:
                self.peers[key] = takeover.Sighting(lease.value.acted_at, time.monotonic())

    def acted(self, now: datetime) -> None:
        """A fire pass over the shards we hold is done (nothing awaited since it read `shard_ids`)."""
        self.acted_at = now
        for shard in self.unserved:
            lease = self.owned.get(shard)
            gap = lease.acted(now) if lease is not None else None
            if gap is not None:
                metrics.child(metrics.TAKEOVER_GAP, kind="trigger_shard").observe(gap)
        self.unserved.clear()

    def _stamp(self) -> None:
        """What the renewals carry: the last fire pass, on the shards it served."""
        self.member.acted_at = self.acted_at
        for shard, lease in self.owned.items():
            if shard not in self.unserved:
                lease.acted_at = self.acted_at

    async def _heartbeat(self) -> None:
        if not await self.member.keep(force=True):
            await self.member.take()

    async def _renew(self, shard: int, lease: HeldLease) -> None:
        if not await lease.keep(force=True):
            log.warning("shard lost", shard=shard, why=lease.why_dropped)
            self.owned.pop(shard, None)
            self.unserved.discard(shard)

    async def balance(self) -> list[int]:
        """Renew what we hold, drop what we lost, take free shards up to our share; returns new shards."""
        self._stamp()
        # All renewals at once: one slow round trip must not push the others past their TTL.
        beat, *_ = await asyncio.gather(self._heartbeat(), *(self._renew(shard, lease)
                                                             for shard, lease in list(self.owned.items())),
                                        return_exceptions=True)
        if isinstance(beat, BaseException):
            raise beat
        members = await self._members()
        share = math.ceil(self.shards / max(1, len(members)))
        while len(self.owned) > share:
            shard, lease = self.owned.popitem()
            self.unserved.discard(shard)
            await lease.release()
        gained: list[int] = []
        start = int(stable_fraction(self.replica) * self.shards)
        for i in range(self.shards):
            if len(self.owned) >= share:
                break
            shard = (start + i) % self.shards
            if shard in self.owned:
                continue
            asked = time.monotonic()
            lease = HeldLease(self.leases, s.shard_lease_key(shard), self.replica, self.ttl)
            if await lease.take():
                # The index is kept warm on every replica: a won shard serves at once.
                metrics.child(metrics.TAKEOVER_DURATION, kind="trigger_shard").observe(time.monotonic() - asked)
                if lease.before is None:  # found empty: its holder's lease lapsed, unread
                    lease.before = takeover.last_of_departed(self.peers, members, time.monotonic(), self.ttl)
                self.owned[shard] = lease
                self.unserved.add(shard)
                gained.append(shard)
                metrics.child(metrics.TAKEOVERS, kind="trigger_shard").inc()
        takeover.forget_departed(self.peers, members, time.monotonic(), self.ttl)
        metrics.TRIGGER_SHARDS.set(self.shards)
        metrics.child(metrics.LEASES_HELD, kind="trigger_shard").set(len(self.owned))
        return gained

    async def release_all(self) -> None:
        self._stamp()
        for lease in self.owned.values():
            await lease.release()
        self.owned.clear()
        self.unserved.clear()
        metrics.child(metrics.LEASES_HELD, kind="trigger_shard").set(0)
        await self.member.release()

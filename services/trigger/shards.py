"""Shard ownership: each shard held by one replica through a KV lease; replicas balance among themselves."""

from __future__ import annotations

import asyncio
import math
import time

import structlog

from jetcron.bus.lease import Lease, Leases
from jetcron.core.errors import JetcronError, LeaseLost
from jetcron.core.ids import stable_fraction
from jetcron.telemetry import metrics
from jetcron.wire import subjects as s

log = structlog.get_logger("jetcron.trigger.shards")


class ShardOwner:
    """Holds this replica's fair share of shard leases; renew() is called every TTL/3."""

    def __init__(self, leases: Leases, replica: str, shards: int, ttl: float) -> None:
        self.leases = leases
        self.replica = replica
        self.shards = shards
        self.ttl = ttl
        self.owned: dict[int, Lease] = {}
        self.renewed_at: dict[int, float] = {}
        self.member: Lease | None = None

    @property
    def shard_ids(self) -> set[int]:
        return set(self.owned)

    async def _members(self) -> int:
        return max(1, len(await self.leases.keys(s.TRIGGER_MEMBERS)))

    async def _heartbeat(self) -> None:
        key = s.trigger_member_key(self.replica)
        if self.member is not None:
            try:
                self.member = await self.leases.renew(self.member, self.ttl)
                return
            except LeaseLost:
                self.member = None
        self.member = await self.leases.acquire(key, self.replica, self.ttl)

    async def _renew(self, shard: int, lease: Lease, now: float) -> None:
        try:
            self.owned[shard] = await self.leases.renew(lease, self.ttl)
            self.renewed_at[shard] = now
        except LeaseLost:
            log.warning("shard lost", shard=shard)
            self.owned.pop(shard, None)
        except JetcronError:
            # Self-fence: a shard we could not renew for most of a TTL may already be someone else's.
            if now - self.renewed_at.get(shard, now) > self.ttl * 2 / 3:
                self.owned.pop(shard, None)

    async def balance(self) -> list[int]:
        """Renew what we hold, drop what we lost, take free shards up to our share; returns new shards."""
        now = time.monotonic()
        # All renewals at once: one slow round trip must not push the others past their TTL.
        beat, *_ = await asyncio.gather(self._heartbeat(), *(self._renew(shard, lease, now)
                                                             for shard, lease in list(self.owned.items())),
                                        return_exceptions=True)
        if isinstance(beat, BaseException):
            raise beat
        share = math.ceil(self.shards / await self._members())
        while len(self.owned) > share:
            shard, lease = self.owned.popitem()
            await self.leases.release(lease)
        gained: list[int] = []
        start = int(stable_fraction(self.replica) * self.shards)
        for i in range(self.shards):
            if len(self.owned) >= share:
                break
            shard = (start + i) % self.shards
            if shard in self.owned:
                continue
            asked = time.monotonic()
            won = await self.leases.acquire(s.shard_lease_key(shard), self.replica, self.ttl)
            if won is not None:
                # The index is kept warm on every replica: a won shard serves at once.
                metrics.TAKEOVER_DURATION.labels(kind="trigger_shard").observe(time.monotonic() - asked)
                self.owned[shard] = won
                self.renewed_at[shard] = now
                gained.append(shard)
                metrics.TAKEOVERS.labels(kind="trigger_shard").inc()
        metrics.TRIGGER_SHARDS.set(self.shards)
        metrics.LEASES_HELD.labels(kind="trigger_shard").set(len(self.owned))
        return gained

    async def release_all(self) -> None:
        for lease in self.owned.values():
            await self.leases.release(lease)
        self.owned.clear()
        metrics.LEASES_HELD.labels(kind="trigger_shard").set(0)
        if self.member is not None:
            await self.leases.release(self.member)

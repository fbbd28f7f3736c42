"""Shard ownership: each shard held by one replica through a KV lease; replicas balance among themselves."""

from __future__ import annotations

import asyncio
import math
import time

import structlog

from jetcron.bus.lease import HeldLease, Leases
from jetcron.core.ids import stable_fraction
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

    @property
    def shard_ids(self) -> set[int]:
        return set(self.owned)

    async def _members(self) -> int:
        return max(1, len(await self.leases.keys(s.TRIGGER_MEMBERS)))

    async def _heartbeat(self) -> None:
        if not await self.member.keep(force=True):
            await self.member.take()

    async def _renew(self, shard: int, lease: HeldLease) -> None:
        if not await lease.keep(force=True):
            log.warning("shard lost", shard=shard, why=lease.why_dropped)
            self.owned.pop(shard, None)

    async def balance(self) -> list[int]:
        """Renew what we hold, drop what we lost, take free shards up to our share; returns new shards."""
        # All renewals at once: one slow round trip must not push the others past their TTL.
        beat, *_ = await asyncio.gather(self._heartbeat(), *(self._renew(shard, lease)
                                                             for shard, lease in list(self.owned.items())),
                                        return_exceptions=True)
        if isinstance(beat, BaseException):
            raise beat
        share = math.ceil(self.shards / await self._members())
        while len(self.owned) > share:
            _, lease = self.owned.popitem()
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
                self.owned[shard] = lease
                gained.append(shard)
                metrics.child(metrics.TAKEOVERS, kind="trigger_shard").inc()
        metrics.TRIGGER_SHARDS.set(self.shards)
        metrics.child(metrics.LEASES_HELD, kind="trigger_shard").set(len(self.owned))
        return gained

    async def release_all(self) -> None:
        for lease in self.owned.values():
            await lease.release()
        self.owned.clear()
        metrics.child(metrics.LEASES_HELD, kind="trigger_shard").set(0)
        await self.member.release()

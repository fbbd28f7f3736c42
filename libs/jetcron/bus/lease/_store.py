"""A lease log read as leases, and written by revision so that each write outlives what it writes over."""

from __future__ import annotations

import time

from jetcron.bus.lease._values import Lease, LeaseValue
from jetcron.bus.ports import LeaseEntry, LeaseLog
from jetcron.core.lifecycle.leases import outlasting
from jetcron.wire import subjects as s
from jetcron.wire.codec import decode, encode

TAKE_TRIES = 3
"""Reads and writes a step tries before it gives up on a lease others keep writing."""


class LeaseStore:
    """Leases read from a LeaseLog, and the revision-checked write every change of one goes through."""

    def __init__(self, log: LeaseLog) -> None:
        self.log = log

    async def _write(self, key: str, value: LeaseValue, ttl: float, expected: int | None, *, writer: str,
                     outlast: float = 0.0) -> int:
        return await self.log.write(key, writer, encode(value), outlasting(ttl, outlast, time.monotonic()),
                                    expected)

    @staticmethod
    def _over(current: Lease | None, read_at: float) -> float:
        """Until when `current` (read at `read_at`) may be stored: it was written before we read it, so it
        expires within its TTL of that read."""
        if current is None or not current.writer:
            return 0.0
        return max(current.outlast, read_at + (current.ttl if current.ttl is not None else 0.0))

    async def keys(self, pattern: str) -> list[str]:
        """Live lease keys matching a subject pattern (expired ones are gone from the stream)."""
        return await self.log.keys(pattern)

    async def shard_holders(self, shards: int) -> dict[int, str]:
        """Which replica holds each trigger shard lease right now (free shards are absent)."""
        held: dict[int, str] = {}
        for shard in range(shards):
            lease = await self.read(s.shard_lease_key(shard))
            if lease is not None and lease.value.holder:
                held[shard] = lease.value.holder
        return held

    async def read(self, key: str) -> Lease | None:
        """The live lease, or None when expired, released or never taken."""
        return self._lease(key, await self.log.last(key))

    async def own(self, key: str, writer: str) -> Lease | None:
        """`writer`'s own live claim on a lease stored as claims, whatever was written after it."""
        return self._lease(key, await self.log.own(key, writer))

    @staticmethod
    def _lease(key: str, entry: LeaseEntry | None) -> Lease | None:
        if entry is None:
            return None
        # A released or revoked marker comes back with an empty holder: callers read that as free.
        return Lease(key=key, token=entry.revision, value=decode(entry.data, LeaseValue), written_at=entry.written_at,
                     ttl=entry.ttl, writer=entry.writer)

"""Claims on run, leader and shard leases: acquired, renewed, released, revoked and taken over."""

from __future__ import annotations

import secrets
import time
from datetime import datetime

import msgspec

from jetcron.bus.lease._store import TAKE_TRIES, LeaseStore
from jetcron.bus.lease._values import Lease, LeaseValue, writer_of
from jetcron.core.errors import LeaseLost, WriteConflict
from jetcron.wire import subjects as s

RELEASED_TTL = 1  # seconds a release marker lives; then the key is empty and create() works again


class Claims(LeaseStore):
    """Run, leader and shard leases, each taken by one holder at a time and fenced by its revision."""

    async def acquire(
        self, key: str, holder: str, ttl: float, *, attempt: int = 0, now: datetime | None = None, bound: str = ""
    ) -> Lease | None:
        """Take the lease if nobody holds it, or if it is already ours; None if somebody else holds it.

        Ours: the same holder for the same run attempt (attempt >= 1). An earlier try whose write landed but whose
        ack never came (the server slow under a herd: outcome unknown) left it; taken as held elsewhere, the run
        never started and the tracker re-dispatched it a stall later. It is re-armed from now, so that its expiry
        is known. Leader and shard leases (attempt 0) are never adopted: their holder names a process only by
        convention (a replica named by configuration), and two processes must not both come to hold one.
        """
        return (await self._acquire(key, holder, ttl, attempt, now, bound))[0]

    async def contend(self, key: str, holder: str, ttl: float) -> tuple[Lease | None, Lease | None]:
        """A leader or shard lease: acquire() it, and say what was in the way: (ours or None, the lease found
        there, another holder's or the release marker we wrote over; None when the key was empty). The found
        lease's `acted_at` is what the takeover gap is measured from (HeldLease)."""
        return await self._acquire(key, holder, ttl, 0, None)

    async def _acquire(self, key: str, holder: str, ttl: float, attempt: int, now: datetime | None, bound: str = ""
                       ) -> tuple[Lease | None, Lease | None]:
        value = LeaseValue(holder=holder, attempt=attempt, at=now, nonce=secrets.token_hex(8), bound=bound)
        try:
            return Lease(key=key, token=await self._write(key, value, ttl, expected=0, writer=holder), value=value,
                         writer=writer_of(key, holder)), None
        except WriteConflict:
            pass
        read_at = time.monotonic()
        current = await self.read(key)
        ours = attempt > 0 and current is not None and current.writer in ("", holder) and (
            current.value.holder, current.value.attempt) == (holder, attempt)
        if current is None or (current.value.holder and not ours):
            # Held (or expired between our write and read: the caller's next try will get it).
            return None, current
        # A released marker (or our own lease) is still the last message: write over it by revision.
        return await self._claim(key, value, ttl, current, read_at), current

    async def _claim(self, key: str, value: LeaseValue, ttl: float, current: Lease, read_at: float
                     ) -> Lease | None:
        """Write our claim over `current` by its revision; None if anything was written since."""
        outlast = self._over(current, read_at)
        try:
            token = await self._write(key, value, ttl, expected=current.token, writer=value.holder, outlast=outlast)
        except WriteConflict:
            return None
        return Lease(key=key, token=token, value=value, writer=writer_of(key, value.holder), outlast=outlast)

    async def renew(self, lease: Lease, ttl: float, *, now: datetime | None = None,
                    acted_at: datetime | None = None) -> Lease:
        """Re-arm the expiry (stamping the holder's last action, `acted_at`, when given); LeaseLost if it expired
        or someone else wrote it since our token.

        A renewal whose write landed but whose ack never came (outcome unknown: the server slow under a herd)
        leaves the lease one revision past our token. If the stored lease still carries our nonce, that write
        was ours: re-arm over it. Read as lost, it made a trigger drop a shard and an agent kill a healthy run.
        """
        value = msgspec.structs.replace(lease.value, at=now,
                                        acted_at=lease.value.acted_at if acted_at is None else acted_at)
        writer = lease.writer or writer_of(lease.key, lease.value.holder)
        try:
            token = await self._write(lease.key, value, ttl, expected=lease.token, writer=writer,
                                      outlast=lease.outlast)
        except WriteConflict:
            token = await self._rearm_own(msgspec.structs.replace(lease, writer=writer), value, ttl)
        return Lease(key=lease.key, token=token, value=value, writer=writer, outlast=lease.outlast)

    async def _rearm_own(self, lease: Lease, value: LeaseValue, ttl: float) -> int:
        lost = LeaseLost(f"lease {lease.key} (token {lease.token}) was lost")
        current = await self.read(lease.key)
        if (current is None or not lease.value.nonce or current.value.nonce != lease.value.nonce
                or current.writer != lease.writer):
            raise lost
        try:
            return await self._write(lease.key, value, ttl, expected=current.token, writer=lease.writer,
                                     outlast=lease.outlast)
        except WriteConflict:
            raise lost from None

    async def release(self, lease: Lease, *, acted_at: datetime | None = None) -> None:
        """Give it up early so the next holder need not wait for the TTL; losing the race is fine. The marker
        carries the holder's last action (`acted_at`): the next holder writes over it and measures from it."""
        try:
            await self._write(lease.key, LeaseValue(holder="", acted_at=acted_at), RELEASED_TTL,
                              expected=lease.token, writer=lease.writer or writer_of(lease.key, lease.value.holder),
                              outlast=lease.outlast)
        except WriteConflict:
            pass

    async def revoke(self, key: str, why: str, ttl: float) -> int:
        """Take the lease from whoever holds it: their next renewal fails and they stop (fencing).

        Written over the last claim by its revision, so that the revoke outlives it
        (jetcron.core.lifecycle.leases.outlasting); if claims keep landing in between, written regardless."""
        value = LeaseValue(holder="", revoked=why)
        outlast = 0.0
        for _ in range(TAKE_TRIES):
            read_at = time.monotonic()
            current = await self.read(key)
            outlast = max(outlast, self._over(current, read_at))
            try:
                return await self._write(key, value, ttl, expected=current.token if current else 0,
                                         writer=s.LEASE_REVOKER, outlast=outlast)
            except WriteConflict:
                continue
        return await self._write(key, value, ttl, expected=None, writer=s.LEASE_REVOKER, outlast=outlast)

    async def take(self, key: str, holder: str, ttl: float, *, attempt: int, now: datetime | None = None,
                   bound: str = "") -> Lease | None:
        """A run lease for `attempt`: acquired, or taken over from an older attempt (supersede); None if it is
        held for this attempt by someone else, or for a newer one.

        An agent asks only for an attempt placement assigned from the run record, so an older attempt is over
        as far as the record goes: it ended and its release is still to come (its report goes first), it was
        handed back, or it stalled. Skipping the assignment left the run waiting for the tracker's stall
        timeout and then ran it a third time (the chaos suite's storm of failing runs).

        The older holder's release can land between our reads and writes (both come at once in a storm):
        whatever moved under us, we look again, a few times. `bound`: the claim lives as long as the agent lease
        of that nonce (LeaseValue.bound)."""
        for _ in range(TAKE_TRIES):
            lease = await self.acquire(key, holder, ttl, attempt=attempt, now=now, bound=bound)
            if lease is None:
                lease = await self.supersede(key, holder, ttl, attempt=attempt, now=now, bound=bound)
            if lease is not None:
                return lease
            current = await self.read(key)
            if current is not None and current.value.holder and current.value.attempt >= attempt:
                return None
        return None

    async def supersede(
        self, key: str, holder: str, ttl: float, *, attempt: int, now: datetime | None = None, bound: str = ""
    ) -> Lease | None:
        """Take a run lease still held for an older attempt: the record already moved on, so that holder is
        fenced by its next renewal. None if it is free to acquire, held for this or a newer attempt, or raced."""
        read_at = time.monotonic()
        current = await self.read(key)
        if current is None or not current.value.holder or current.value.attempt >= attempt:
            return None
        return await self._claim(key, LeaseValue(holder=holder, attempt=attempt, at=now,
                                                 nonce=secrets.token_hex(8), bound=bound), ttl, current, read_at)

"""Leases with fencing: a KV key whose revision is the token, expiry judged by the server (Nats-TTL)."""

from __future__ import annotations

import asyncio
import contextlib
import math
import secrets
import time
from collections.abc import Awaitable, Callable
from datetime import datetime

import msgspec
from nats.js import JetStreamContext

from jetcron.bus.acks import publish_acked
from jetcron.bus.kv import read_value, scan_keys, translate
from jetcron.bus.ports import LeaseEntry, LeaseLog
from jetcron.core import takeover
from jetcron.core.errors import JetcronError, LeaseLost, WriteConflict
from jetcron.core.leases import outlasting
from jetcron.wire import subjects as s
from jetcron.wire.codec import decode, encode

RELEASED_TTL = 1  # seconds a release marker lives; then the key is empty and create() works again
_TAKE_TRIES = 3


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
    from it (jetcron.core.takeover). None on run leases, and until the holder has acted."""
    bound: str = ""
    """A run claim bound to its agent's lease (liveness per agent): that lease's nonce. The claim is alive while the
    agent's lease still carries this nonce, whatever the claim's own (long) TTL says; "" for a claim that is its
    own liveness (renewed every TTL/3), a gang member's and every other lease."""
    stops: tuple[Stop, ...] = ()
    """A stop notice on an agent lease (written by a revoker): attempts that agent must stop. Its next renewal
    fails its revision check, finds the notice and stops them, so a lost control message still stops them."""


class Lease(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """One per attempt an agent holds (a staged herd: tens of thousands): plain data, untracked
    (jetcron.core.models)."""

    key: str
    token: int
    """The revision of the write that granted or renewed it: the fencing token."""
    value: LeaseValue
    written_at: datetime | None = None
    """Server time of that write, when read back: the lease expires `ttl` after it (by the server's clock)."""
    ttl: float | None = None
    """The TTL that write carried (its Nats-TTL header), when read back: a staged run's first lease is granted
    for its wait too (jetcron.core.leases.first_grant), so the run lease TTL alone would say it lapsed long ago."""
    writer: str = ""
    """A run lease: whose claim this is, from its subject (subjects.lease_writer), which the server's
    permissions vouch for; the holder inside the value is only what the writer said."""
    outlast: float = 0.0
    """Monotonic time until which an older claim by another writer may still be stored: our writes outlive it
    (jetcron.core.leases.outlasting)."""


def unclaimed(key: str, holder: str, attempt: int, bound: str) -> Lease:
    """An attempt's claim not written yet (jetcron.core.leases.claims_late): token 0, nothing stored; `bound` to the
    agent lease that fences it meanwhile."""
    return Lease(key=key, token=0, value=LeaseValue(holder=holder, attempt=attempt, bound=bound),
                 writer=_writer(key, holder))


def _ttl_of(headers: dict[str, str] | None) -> float | None:
    try:
        return float((headers or {})[s.HDR_TTL])
    except (KeyError, ValueError):  # not ours: a write by hand, or a duration like "1m" (we write seconds)
        return None


def _writer(key: str, holder: str) -> str:
    """Whose claim a lease we wrote is (a run lease); "" for a lease stored as one subject."""
    return holder if s.by_claims(key) else ""


def _ttl_header(ttl: float) -> str:
    # Whole seconds: the header also takes durations, but seconds are what every server version accepts.
    return str(max(1, math.ceil(ttl)))


class ServerLeaseLog:
    """ports.LeaseLog on JetStream: raw, revision-checked publishes to the lease buckets.

    nats-py's KeyValue.update() carries no TTL, so a renewal through it would make the lease immortal; each write
    here carries both Nats-TTL and Nats-Expected-Last-Subject-Sequence (docs/decisions-nats.md). Each key lives in
    the bucket `subjects.lease_bucket` names: run leases apart from leader and shard leases."""

    def __init__(self, js: JetStreamContext) -> None:
        self.js = js

    async def write(self, key: str, writer: str, data: bytes, ttl: float, expected: int | None) -> int:
        headers = {s.HDR_TTL: _ttl_header(ttl)}
        subject, group = s.lease_subject(key, writer), s.lease_filter(key)
        if expected is not None:
            headers[s.HDR_EXPECTED_LAST_SUBJECT_SEQ] = str(expected)
            if group != subject:  # checked against every writer's claim on the run: anyone's newer write fences
                headers[s.HDR_EXPECTED_LAST_SUBJECT_SEQ_SUBJECT] = group
        try:
            return await publish_acked(self.js, subject, data, headers)
        except Exception as exc:
            raise translate(exc, f"lease {key}") from exc

    async def last(self, key: str) -> LeaseEntry | None:
        return await self._entry(key, s.lease_filter(key))

    async def own(self, key: str, writer: str) -> LeaseEntry | None:
        return await self._entry(key, s.lease_subject(key, writer))

    async def _entry(self, key: str, subject: str) -> LeaseEntry | None:
        found = await read_value(self.js, s.kv_stream(s.lease_bucket(key)), subject, f"lease {key}")
        if found is None:
            return None
        data, msg = found
        return LeaseEntry(data=data, revision=int(msg.seq or 0), written_at=msg.time, ttl=_ttl_of(msg.headers),
                          writer=s.lease_writer(msg.subject or ""))

    async def keys(self, pattern: str) -> list[str]:
        try:
            return await scan_keys(self.js, s.lease_bucket(pattern), pattern)
        except Exception as exc:
            raise translate(exc, f"list leases {pattern}") from exc


def on_server(js: JetStreamContext) -> Leases:
    """Leases kept in the server's lease buckets."""
    return Leases(ServerLeaseLog(js))


class Leases:
    """Acquire, renew, release and revoke leases with fencing, over a LeaseLog (the server's, or the twin's in
    jetcron.bus.memory): every write is revision-checked and carries its TTL, and the storage's clock judges expiry."""

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
                         writer=_writer(key, holder)), None
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
        return Lease(key=key, token=token, value=value, writer=_writer(key, value.holder), outlast=outlast)

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
        writer = lease.writer or _writer(lease.key, lease.value.holder)
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
                              expected=lease.token, writer=lease.writer or _writer(lease.key, lease.value.holder),
                              outlast=lease.outlast)
        except WriteConflict:
            pass

    async def revoke(self, key: str, why: str, ttl: float) -> int:
        """Take the lease from whoever holds it: their next renewal fails and they stop (fencing).

        Written over the last claim by its revision, so that the revoke outlives it (jetcron.core.leases.outlasting);
        if claims keep landing in between, written regardless."""
        value = LeaseValue(holder="", revoked=why)
        outlast = 0.0
        for _ in range(_TAKE_TRIES):
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
        for _ in range(_TAKE_TRIES):
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

    # Liveness per agent: one lease per agent (subjects.agent_lease_key) fences every attempt it holds.

    async def hold_agent(self, agent_id: str, ttl: float) -> Lease | None:
        """Take this agent's own lease; None while a claim of its own is still live (an earlier life of the
        agent, or a second process under its name: it expires within its TTL, and then this one takes it).

        Written over whatever else is last (a stop notice, a release marker, another writer's claim) by its
        revision, and never made to outlive it: the agent's claim must expire exactly a TTL after its last
        write, for that is when its runs are judged lost."""
        key = s.agent_lease_key(agent_id)
        value = LeaseValue(holder=agent_id, nonce=secrets.token_hex(8))
        for _ in range(_TAKE_TRIES):
            mine = await self.own(key, agent_id)
            if mine is not None and mine.value.holder:
                return None
            current = await self.read(key)
            try:
                token = await self.log.write(key, agent_id, encode(value), ttl,
                                             current.token if current is not None else 0)
            except WriteConflict:
                continue
            return Lease(key=key, token=token, value=value, writer=agent_id)
        return None

    async def renew_agent(self, lease: Lease, ttl: float) -> tuple[Lease, tuple[Stop, ...]]:
        """Re-arm an agent lease, and the stops any notice written on it since the last renewal carried.

        Anything written on the key since our token fails the revision check: a stop notice, or a renewal of
        ours whose ack was lost. Then our own claim is read: still live and carrying our nonce, the renewal is
        written over the key's last write (a notice's stops are returned, to be carried out); gone or another
        life's (expired by the server's clock, taken by a new process of the agent), it is LeaseLost."""
        key, writer = lease.key, lease.writer
        value = msgspec.structs.replace(lease.value, at=None)
        try:
            return Lease(key=key, token=await self.log.write(key, writer, encode(value), ttl, lease.token),
                         value=value, writer=writer), ()
        except WriteConflict:
            pass
        for _ in range(_TAKE_TRIES):
            mine = await self.own(key, writer)
            if mine is None or mine.value.nonce != lease.value.nonce:
                raise LeaseLost(f"agent lease {key} (token {lease.token}) was lost")
            last = await self.read(key)
            stops = last.value.stops if last is not None and last.writer == s.LEASE_REVOKER else ()
            try:
                token = await self.log.write(key, writer, encode(value), ttl, last.token if last is not None else 0)
            except WriteConflict:
                continue  # another notice landed meanwhile: read it too
            return Lease(key=key, token=token, value=value, writer=writer), stops
        raise WriteConflict(f"agent lease {key}: written by others on every try")

    async def notify_stops(self, agent_id: str, stop: Stop, ttl: float) -> bool:
        """Tell an agent holding its own lease to stop an attempt, through that lease: its next renewal (within
        a third of its TTL) finds the notice, whether or not the control message reached it. A notice keeps the
        stops of the last `ttl` seconds not yet read (appended to by revision); False when the agent holds no
        lease (gone, or an agent whose runs renew their own claims: the revoked run claim stops those)."""
        key = s.agent_lease_key(agent_id)
        for _ in range(_TAKE_TRIES):
            current = await self.read(key)
            if current is None:
                return False
            kept = current.value.stops if current.writer == s.LEASE_REVOKER else ()
            stops = (*(x for x in kept if x.at >= stop.at - ttl), stop)
            try:
                await self.log.write(key, s.LEASE_REVOKER, encode(LeaseValue(holder="", revoked="stop", stops=stops)),
                                     ttl, current.token)
            except WriteConflict:
                continue
            return True
        return False


class HeldLease:
    """A lease one replica holds to act alone: the placement leader, the tracker's sweeper, a trigger shard or
    its membership. Taken when free; renewed every TTL/3; dropped when lost; given up when no renewal has
    succeeded for 2/3 of the TTL, so that the holder stops acting before the server can have expired it and
    another replica taken over (self-fencing). One home for what the services' loops did each their own way."""

    def __init__(self, leases: Leases, key: str, holder: str, ttl: float) -> None:
        self.leases, self.key, self.holder, self.ttl = leases, key, holder, ttl
        self.lease: Lease | None = None
        self.renewed_at = 0.0
        self.why_dropped = ""
        """Why the last lease held was dropped: lost to another writer, or given up unrenewed."""
        self.acted_at: datetime | None = None
        """Our last real action while holding it (`acted`): stamped in each renewal and in the release marker."""
        self.before: datetime | None = None
        """Once won: the previous holder's last action, when known, until our first action measures the gap."""
        self.seen: takeover.Sighting | None = None
        """The last holder seen while it held the lease (another replica on a failed take, or ourselves when we
        dropped it): an expired lease leaves nothing to read, so the gap is measured from this."""

    @property
    def held(self) -> bool:
        return self.lease is not None

    async def take(self) -> bool:
        """Acquire it if free (True also when already held); storage errors propagate to the caller."""
        if self.lease is None:
            self.lease, found = await self.leases.contend(self.key, self.holder, self.ttl)
            now = time.monotonic()
            if self.lease is None:
                if found is not None and found.value.holder:
                    self.seen = takeover.Sighting(found.value.acted_at, now)
            else:
                self.renewed_at = now
                self.acted_at = None
                self.before = takeover.previous_action(found.value.acted_at if found is not None else None,
                                                       self.seen, now, self.ttl)
                self.seen = None
        return self.lease is not None

    def acted(self, now: datetime) -> float | None:
        """Note a real action of the holder (wall clock); the first one since the lease was won returns the
        takeover gap in seconds (jetcron.core.takeover.gap), None when the previous holder's last action is unknown."""
        self.acted_at = now
        before, self.before = self.before, None
        return None if before is None else takeover.gap(before, now)

    async def keep(self, *, force: bool = False) -> bool:
        """Renew it once a third of the TTL has passed since the last renewal (or now, `force`); whether it is
        still held. A lost lease is dropped at once; a renewal that fails otherwise keeps it until 2/3 of the
        TTL has passed without one."""
        if self.lease is None:
            return False
        now = time.monotonic()
        if not force and now - self.renewed_at < self.ttl / 3:
            return True
        try:
            self.lease = await self.leases.renew(self.lease, self.ttl, acted_at=self.acted_at)
            self.renewed_at = now
        except LeaseLost:
            self._drop("lost")
        except Exception:  # any renewal that did not land is one that failed: judged by the clock
            if now - self.renewed_at > self.ttl * 2 / 3:
                self._drop(f"not renewed for {now - self.renewed_at:.1f} s")
        return self.lease is not None

    async def hold(self, stop: asyncio.Event) -> None:
        """Keep it until it is lost, given up, or `stop` is set (then released)."""
        while self.lease is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=self.ttl / 3)
            if stop.is_set():
                await self.release()
                return
            await self.keep(force=True)

    async def lead(self, stop: asyncio.Event, act: Callable[[], Awaitable[None]], *, every: float,
                   failed: Callable[[Exception], None]) -> None:
        """While it is held: renew it beside the work (hold), and `act` every `every` seconds. A round that takes
        long delays no renewal, and one that fails is reported (`failed`) and tried again the next round: neither
        lets the lease lapse while this replica is alive, nor ends its leading. Returns once the lease is lost or
        given up, or `stop` is set (then released)."""
        holding = asyncio.create_task(self.hold(stop))
        try:
            while self.held and not stop.is_set() and not holding.done():
                try:
                    await act()
                except Exception as exc:  # the next round tries again; the caller logs it
                    failed(exc)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), timeout=every)
        finally:
            if not stop.is_set():  # lost, or this task cancelled: a held lease is left to lapse, as a crash would
                holding.cancel()
            await asyncio.gather(holding, return_exceptions=True)

    async def release(self) -> None:
        """Give it up now (the next holder need not wait for the TTL); a failed release just lets it expire."""
        lease, self.lease = self.lease, None
        if lease is not None:
            self.seen = takeover.Sighting(self.acted_at, time.monotonic())
            with contextlib.suppress(JetcronError):
                await self.leases.release(lease, acted_at=self.acted_at)

    def _drop(self, why: str) -> None:
        # We are its last holder we know of: should we take it back, the gap is our own (should another replica
        # take it, our next try sees that one instead).
        self.lease, self.why_dropped = None, why
        self.seen = takeover.Sighting(self.acted_at, time.monotonic())

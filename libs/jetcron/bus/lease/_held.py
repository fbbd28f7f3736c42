"""A lease one replica holds to act alone, renewed beside its work and given up before it can have expired."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from datetime import datetime

from jetcron.bus.lease._leases import Leases
from jetcron.bus.lease._values import Lease
from jetcron.core.errors import JetcronError, LeaseLost
from jetcron.core.lifecycle import takeover


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
        takeover gap in seconds (jetcron.core.lifecycle.takeover.gap), None when the previous holder's last action is
        unknown."""
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

"""HeldLease, the one loop behind placement's leadership, the tracker's sweeps and the trigger's shards: renewed
every TTL/3, dropped when lost, given up when no renewal succeeded for 2/3 of the TTL, released on stop."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from jetcron.bus.lease import HeldLease, Lease, LeaseValue
from jetcron.core.errors import LeaseLost, Unavailable

TTL = 9.0


class FakeLeases:
    """Acquire, renew and release as the server would answer them, with failures switched on by the test."""

    def __init__(self) -> None:
        self.free = True
        self.renewals = 0
        self.released: list[int] = []
        self.fail: BaseException | None = None

    async def acquire(self, key: str, holder: str, ttl: float, **_: Any) -> Lease | None:
        if not self.free:
            return None
        self.free = False
        return Lease(key=key, token=1, value=LeaseValue(holder=holder))

    async def renew(self, lease: Lease, ttl: float, **_: Any) -> Lease:
        if self.fail is not None:
            raise self.fail
        self.renewals += 1
        return Lease(key=lease.key, token=lease.token + 1, value=lease.value)

    async def release(self, lease: Lease) -> None:
        self.released.append(lease.token)
        self.free = True


@pytest.fixture
def leases() -> FakeLeases:
    return FakeLeases()


@pytest.fixture
def held(leases: FakeLeases) -> HeldLease:
    return HeldLease(leases, "placement.leader", "placement-a", TTL)  # type: ignore[arg-type]


async def test_it_is_taken_when_free_and_not_when_held_elsewhere(leases: FakeLeases, held: HeldLease) -> None:
    other = HeldLease(leases, "placement.leader", "placement-b", TTL)  # type: ignore[arg-type]
    assert await held.take() and held.held
    assert not await other.take() and not other.held


async def test_it_is_renewed_once_a_third_of_the_ttl_has_passed(leases: FakeLeases, held: HeldLease) -> None:
    await held.take()
    assert await held.keep() and leases.renewals == 0  # just taken: nothing to renew yet
    held.renewed_at = time.monotonic() - TTL / 3
    assert await held.keep() and leases.renewals == 1
    assert await held.keep(force=True) and leases.renewals == 2


async def test_a_lost_lease_is_dropped_at_once(leases: FakeLeases, held: HeldLease) -> None:
    await held.take()
    leases.fail = LeaseLost("lease placement.leader (token 1) was lost")
    assert not await held.keep(force=True)
    assert (held.held, held.why_dropped) == (False, "lost")


async def test_a_failing_renewal_keeps_it_until_two_thirds_of_the_ttl_then_gives_it_up(
        leases: FakeLeases, held: HeldLease) -> None:
    await held.take()
    leases.fail = Unavailable("storage did not answer")
    held.renewed_at = time.monotonic() - TTL / 2
    assert await held.keep(force=True)  # still within 2/3 of the TTL: held, the next renewal may succeed
    held.renewed_at = time.monotonic() - TTL * 0.7
    assert not await held.keep(force=True)  # past it: given up before the server can expire it
    assert held.why_dropped.startswith("not renewed for 6.")


async def test_hold_releases_it_when_stopped(leases: FakeLeases, held: HeldLease) -> None:
    await held.take()
    stop = asyncio.Event()
    stop.set()
    await held.hold(stop)
    assert (held.held, leases.released, leases.free) == (False, [1], True)

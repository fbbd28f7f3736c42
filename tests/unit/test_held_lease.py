"""HeldLease, the one loop behind placement's leadership, the tracker's sweeps and the trigger's shards: renewed
every TTL/3, dropped when lost, given up when no renewal succeeded for 2/3 of the TTL, released on stop."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec
import pytest

from jetcron.bus.lease import HeldLease, Lease, LeaseValue
from jetcron.core.errors import LeaseLost, Unavailable

TTL = 9.0


class FakeLeases:
    """Acquire, renew and release as the server would answer them, with failures switched on by the test. `stored`
    is the lease as the server holds it (None once it has lapsed: the server leaves nothing)."""

    def __init__(self) -> None:
        self.stored: Lease | None = None
        self.renewals = 0
        self.released: list[int] = []
        self.fail: BaseException | None = None

    @property
    def free(self) -> bool:
        return self.stored is None or not self.stored.value.holder

    async def contend(self, key: str, holder: str, ttl: float) -> tuple[Lease | None, Lease | None]:
        found = self.stored
        if not self.free:
            return None, found
        self.stored = Lease(key=key, token=(found.token if found else 0) + 1, value=LeaseValue(holder=holder))
        return self.stored, found

    async def renew(self, lease: Lease, ttl: float, *, acted_at: datetime | None = None, **_: Any) -> Lease:
        if self.fail is not None:
            raise self.fail
        self.renewals += 1
        self.stored = Lease(key=lease.key, token=lease.token + 1,
                            value=msgspec.structs.replace(lease.value, acted_at=acted_at))
        return self.stored

    async def release(self, lease: Lease, *, acted_at: datetime | None = None) -> None:
        self.released.append(lease.token)
        self.stored = Lease(key=lease.key, token=lease.token + 1, value=LeaseValue(holder="", acted_at=acted_at))


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


T0 = datetime(2026, 1, 1, tzinfo=UTC)


async def test_each_renewal_and_the_release_carry_the_last_action(leases: FakeLeases, held: HeldLease) -> None:
    await held.take()
    assert held.acted(T0) is None  # a first start: nobody held it before, no gap
    await held.keep(force=True)
    assert leases.stored is not None and leases.stored.value.acted_at == T0
    held.acted(T0 + timedelta(seconds=1))
    await held.release()
    assert leases.stored.value == LeaseValue(holder="", acted_at=T0 + timedelta(seconds=1))


async def test_a_clean_hand_over_measures_the_gap_from_the_release_marker(leases: FakeLeases, held: HeldLease) -> None:
    await held.take()
    held.acted(T0)
    await held.release()
    other = HeldLease(leases, "placement.leader", "placement-b", TTL)  # type: ignore[arg-type]
    assert await other.take()
    assert other.acted(T0 + timedelta(seconds=0.4)) == pytest.approx(0.4)
    assert other.acted(T0 + timedelta(seconds=9)) is None  # only the first action measures it


async def test_a_lapsed_holder_is_measured_from_what_was_seen_while_it_held(leases: FakeLeases,
                                                                           held: HeldLease) -> None:
    await held.take()
    held.acted(T0)
    await held.keep(force=True)  # the lease now carries T0
    other = HeldLease(leases, "placement.leader", "placement-b", TTL)  # type: ignore[arg-type]
    assert not await other.take()  # held: what it carries is noted
    leases.stored = None  # the holder died; the server let its lease lapse, leaving nothing to read
    assert await other.take()
    assert other.acted(T0 + timedelta(seconds=7.5)) == pytest.approx(7.5)


async def test_a_sighting_too_old_to_be_the_last_holder_gives_no_gap(leases: FakeLeases, held: HeldLease) -> None:
    await held.take()
    held.acted(T0)
    await held.keep(force=True)
    other = HeldLease(leases, "placement.leader", "placement-b", TTL)  # type: ignore[arg-type]
    await other.take()
    assert other.seen is not None
    other.seen = msgspec.structs.replace(other.seen, seen_at=other.seen.seen_at - 3 * TTL)
    leases.stored = None
    assert await other.take()
    assert other.acted(T0 + timedelta(hours=1)) is None


async def test_a_holder_that_dropped_its_lease_and_takes_it_back_measures_its_own_gap(
        leases: FakeLeases, held: HeldLease) -> None:
    await held.take()
    held.acted(T0)
    leases.fail = LeaseLost("lease placement.leader (token 1) was lost")
    assert not await held.keep(force=True)
    leases.fail, leases.stored = None, None
    assert await held.take()
    assert held.acted(T0 + timedelta(seconds=3)) == pytest.approx(3.0)

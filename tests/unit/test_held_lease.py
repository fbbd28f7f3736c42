"""HeldLease, the one loop behind placement's leadership, the tracker's sweeps and the trigger's shards: renewed
every TTL/3, dropped when lost, given up when no renewal succeeded for 2/3 of the TTL, released on stop. On the
lease log's twin (jetcron.bus.memory), which tests/contract holds to the server's behaviour; a lease lapses when the
test says the server's TTL has passed."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta

import msgspec
import pytest

from jetcron.bus.lease import HeldLease, Lease, Leases, LeaseValue
from jetcron.bus.memory import MemoryLeaseLog
from jetcron.core.errors import Unavailable

TTL = 9.0
KEY = "placement.leader"


class Log(MemoryLeaseLog):
    """The twin, whose writes fail while `fail` is set (the server not answering)."""

    def __init__(self) -> None:
        super().__init__()
        self.fail: BaseException | None = None

    async def write(self, key: str, writer: str, data: bytes, ttl: float, expected: int | None) -> int:
        if self.fail is not None:
            raise self.fail
        return await super().write(key, writer, data, ttl, expected)


@pytest.fixture
def log() -> Log:
    return Log()


@pytest.fixture
def leases(log: Log) -> Leases:
    return Leases(log)


@pytest.fixture
def held(leases: Leases) -> HeldLease:
    return HeldLease(leases, KEY, "placement-a", TTL)


async def stored(leases: Leases) -> Lease | None:
    return await leases.read(KEY)


async def test_it_is_taken_when_free_and_not_when_held_elsewhere(leases: Leases, held: HeldLease) -> None:
    other = HeldLease(leases, KEY, "placement-b", TTL)
    assert await held.take() and held.held
    assert not await other.take() and not other.held


async def test_it_is_renewed_once_a_third_of_the_ttl_has_passed(log: Log, held: HeldLease) -> None:
    await held.take()
    assert await held.keep() and log.writes == 1  # just taken: nothing to renew yet
    held.renewed_at = time.monotonic() - TTL / 3
    assert await held.keep() and log.writes == 2
    assert await held.keep(force=True) and log.writes == 3
    assert held.lease is not None and held.lease.token == 3


async def test_a_lost_lease_is_dropped_at_once(leases: Leases, held: HeldLease) -> None:
    await held.take()
    await leases.revoke(KEY, "taken away", TTL)
    assert not await held.keep(force=True)
    assert (held.held, held.why_dropped) == (False, "lost")


async def test_a_failing_renewal_keeps_it_until_two_thirds_of_the_ttl_then_gives_it_up(
        log: Log, held: HeldLease) -> None:
    await held.take()
    log.fail = Unavailable("storage did not answer")
    held.renewed_at = time.monotonic() - TTL / 2
    assert await held.keep(force=True)  # still within 2/3 of the TTL: held, the next renewal may succeed
    held.renewed_at = time.monotonic() - TTL * 0.7
    assert not await held.keep(force=True)  # past it: given up before the server can expire it
    assert held.why_dropped.startswith("not renewed for 6.")


async def test_hold_releases_it_when_stopped(leases: Leases, held: HeldLease) -> None:
    await held.take()
    stop = asyncio.Event()
    stop.set()
    await held.hold(stop)
    marker = await stored(leases)
    assert not held.held and marker is not None and (marker.token, marker.value.holder) == (2, "")


T0 = datetime(2026, 1, 1, tzinfo=UTC)


async def test_each_renewal_and_the_release_carry_the_last_action(leases: Leases, held: HeldLease) -> None:
    await held.take()
    assert held.acted(T0) is None  # a first start: nobody held it before, no gap
    await held.keep(force=True)
    renewed = await stored(leases)
    assert renewed is not None and renewed.value.acted_at == T0
    held.acted(T0 + timedelta(seconds=1))
    await held.release()
    released = await stored(leases)
    assert released is not None and released.value == LeaseValue(holder="", acted_at=T0 + timedelta(seconds=1))


async def test_a_clean_hand_over_measures_the_gap_from_the_release_marker(leases: Leases, held: HeldLease) -> None:
    await held.take()
    held.acted(T0)
    await held.release()
    other = HeldLease(leases, KEY, "placement-b", TTL)
    assert await other.take()
    assert other.acted(T0 + timedelta(seconds=0.4)) == pytest.approx(0.4)
    assert other.acted(T0 + timedelta(seconds=9)) is None  # only the first action measures it


async def test_a_lapsed_holder_is_measured_from_what_was_seen_while_it_held(leases: Leases, log: Log,
                                                                           held: HeldLease) -> None:
    await held.take()
    held.acted(T0)
    await held.keep(force=True)  # the lease now carries T0
    other = HeldLease(leases, KEY, "placement-b", TTL)
    assert not await other.take()  # held: what it carries is noted
    log.expire(KEY)  # the holder died; the server let its lease lapse, leaving nothing to read
    assert await other.take()
    assert other.acted(T0 + timedelta(seconds=7.5)) == pytest.approx(7.5)


async def test_a_sighting_too_old_to_be_the_last_holder_gives_no_gap(leases: Leases, log: Log,
                                                                    held: HeldLease) -> None:
    await held.take()
    held.acted(T0)
    await held.keep(force=True)
    other = HeldLease(leases, KEY, "placement-b", TTL)
    await other.take()
    assert other.seen is not None
    other.seen = msgspec.structs.replace(other.seen, seen_at=other.seen.seen_at - 3 * TTL)
    log.expire(KEY)
    assert await other.take()
    assert other.acted(T0 + timedelta(hours=1)) is None


async def test_a_holder_that_dropped_its_lease_and_takes_it_back_measures_its_own_gap(
        leases: Leases, log: Log, held: HeldLease) -> None:
    await held.take()
    held.acted(T0)
    await leases.revoke(KEY, "taken away", TTL)
    assert not await held.keep(force=True)
    log.expire(KEY)
    assert await held.take()
    assert held.acted(T0 + timedelta(seconds=3)) == pytest.approx(3.0)

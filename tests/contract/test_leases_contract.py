"""Leases with fencing (bus/lease.py) over ports.LeaseLog: the same behaviour on the server's lease buckets and on
the twin (bus/memory.MemoryLeaseLog). Expiry is the server's clock: on the twin a test lets a lease lapse."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from contract_support import LeaseSide, names
from harness import wait_for

from jetcron.core.errors import LeaseLost
from jetcron.wire import subjects as s

AT = datetime(2026, 12, 5, 12, tzinfo=UTC)


def leader_key() -> str:
    return f"ct{next(names)}.leader"


def run_key() -> str:
    return s.run_lease_key(f"r{next(names)}")


async def test_a_free_lease_is_taken_once_and_the_token_is_its_revision(lease_side: LeaseSide) -> None:
    leases, key = lease_side.leases, leader_key()
    mine = await leases.acquire(key, "replica-a", 30)
    assert mine is not None and mine.token > 0 and mine.value.holder == "replica-a"
    # Another holder finds it held, and changes nothing
    assert await leases.acquire(key, "replica-b", 30) is None
    stored = await leases.read(key)
    assert stored is not None and (stored.token, stored.value.holder, stored.ttl) == (mine.token, "replica-a", 30.0)
    assert key in await leases.keys("*.leader")


async def test_a_renewal_moves_the_token_on_and_a_stale_one_is_refused(lease_side: LeaseSide) -> None:
    leases, key = lease_side.leases, leader_key()
    first = await leases.acquire(key, "replica-a", 30)
    assert first is not None
    second = await leases.renew(first, 2.5, acted_at=AT)
    assert second.token > first.token and second.value.acted_at == AT
    stored = await leases.read(key)
    # Its TTL is whole seconds, rounded up
    assert stored is not None and (stored.token, stored.ttl) == (second.token, 3.0)
    # A renewal against the first token, by another process of the same name (another nonce), is refused
    impostor = await leases.acquire(leader_key(), "replica-a", 30)
    assert impostor is not None
    with pytest.raises(LeaseLost, match=rf"^lease {key} \(token {first.token}\) was lost$"):
        await leases.renew(first.__class__(key=key, token=first.token, value=impostor.value), 30)
    assert (await leases.read(key)) == stored


async def test_a_renewal_whose_ack_was_lost_is_taken_again_over_itself(lease_side: LeaseSide) -> None:
    # Given a renewal that landed while its holder never heard back (it still holds the old token)
    leases, key = lease_side.leases, leader_key()
    lease = await leases.acquire(key, "replica-a", 30)
    assert lease is not None
    landed = await leases.renew(lease, 30)
    # When it renews with the old token, then the stored lease carries its nonce: re-armed over its own write
    again = await leases.renew(lease, 30)
    assert again.token > landed.token
    assert (await leases.read(key)) is not None


async def test_a_release_frees_it_at_once_and_a_revoke_fences_the_holder(lease_side: LeaseSide) -> None:
    leases, key = lease_side.leases, leader_key()
    lease = await leases.acquire(key, "replica-a", 30)
    assert lease is not None
    await leases.release(lease, acted_at=AT)
    marker = await leases.read(key)
    assert marker is not None and marker.value.holder == "" and marker.value.acted_at == AT
    # The next holder writes over the release marker, and sees what was in the way
    taken, found = await leases.contend(key, "replica-b", 30)
    assert taken is not None and found is not None and found.value.acted_at == AT
    # Revoked: its holder's next renewal fails
    await leases.revoke(key, "test: taken away", 30)
    with pytest.raises(LeaseLost):
        await leases.renew(taken, 30)
    revoked = await leases.read(key)
    assert revoked is not None and (revoked.value.holder, revoked.value.revoked) == ("", "test: taken away")


async def test_a_run_lease_is_one_claim_per_writer_and_any_newer_claim_fences(lease_side: LeaseSide) -> None:
    leases, key = lease_side.leases, run_key()
    first = await leases.take(key, "agent-1", 30, attempt=1)
    assert first is not None and first.writer == "agent-1"
    # The same attempt is not taken by another agent; a newer attempt is, over the older one's claim
    assert await leases.take(key, "agent-2", 30, attempt=1) is None
    second = await leases.take(key, "agent-2", 30, attempt=2)
    assert second is not None and second.token > first.token and second.writer == "agent-2"
    # The older holder's renewal of its own claim is fenced by the newer claim on the run
    with pytest.raises(LeaseLost):
        await leases.renew(first, 30)
    # An older attempt is never taken back
    assert await leases.take(key, "agent-1", 30, attempt=1) is None
    stored = await leases.read(key)
    assert stored is not None
    assert (stored.value.holder, stored.value.attempt, stored.writer) == ("agent-2", 2, "agent-2")


async def test_a_lease_that_lapses_is_gone_and_free_to_take(lease_side: LeaseSide) -> None:
    leases, key = lease_side.leases, leader_key()
    assert await leases.acquire(key, "replica-a", 1) is not None
    if lease_side.lapse is not None:
        lease_side.lapse(key)
    # The server drops it once its TTL has passed on its own clock
    await wait_for(lambda: _gone(lease_side, key), 10, what="the lease to lapse")
    assert key not in await leases.keys("*.leader")
    taken = await leases.acquire(key, "replica-b", 30)
    assert taken is not None and taken.value.holder == "replica-b"


async def _gone(side: LeaseSide, key: str) -> bool:
    return await side.leases.read(key) is None

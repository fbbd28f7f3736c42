"""Leases with fencing (jetcron.bus.lease) over ports.LeaseLog: the same behaviour on the server's lease buckets and on
the twin (jetcron.bus.memory.MemoryLeaseLog). Expiry is the server's clock: on the twin a test lets a lease lapse."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from contract_support import LeaseSide, names
from harness import wait_for

from jetcron.bus.lease import Stop
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


def agent_name() -> str:
    return f"agent-{next(names)}"


async def test_an_agent_lease_is_held_once_and_a_stop_notice_reaches_its_next_renewal(lease_side: LeaseSide) -> None:
    # Given an agent holding its own lease, and a run claim bound to it
    leases, agent = lease_side.leases, agent_name()
    key = s.agent_lease_key(agent)
    lease = await leases.hold_agent(agent, 30)
    assert lease is not None and (lease.writer, lease.value.holder) == (agent, agent)
    claim = await leases.take(run_key(), agent, 600, attempt=1, bound=lease.value.nonce)
    assert claim is not None and claim.value.bound == lease.value.nonce
    # A second life of the agent does not take it while the first one's claim is live
    assert await leases.hold_agent(agent, 30) is None
    # When two stops are notified on it (each written over the last by revision)
    stops = [Stop(run_id=f"r{i}", attempt=1, reason="cancelled", at=AT.timestamp()) for i in (1, 2)]
    assert [await leases.notify_stops(agent, stop, 30) for stop in stops] == [True, True]
    # Then the agent's own claim is still there, under the notice
    mine = await leases.own(key, agent)
    assert mine is not None and (mine.token, mine.value.nonce) == (lease.token, lease.value.nonce)
    # And its next renewal fails its revision check, finds both stops, and renews over the notice
    renewed, found = await leases.renew_agent(lease, 30)
    assert found == tuple(stops) and renewed.token > lease.token and renewed.value.nonce == lease.value.nonce
    # And the renewal after that finds nothing more
    again, found = await leases.renew_agent(renewed, 30)
    assert found == () and again.token > renewed.token
    # An agent holding no lease of its own is told nothing (its runs' own claims carry the revoke)
    assert await leases.notify_stops(agent_name(), stops[0], 30) is False


async def test_an_agent_lease_that_lapsed_is_lost_to_its_renewal_and_taken_by_the_next_life(
        lease_side: LeaseSide) -> None:
    leases, agent = lease_side.leases, agent_name()
    key = s.agent_lease_key(agent)
    lease = await leases.hold_agent(agent, 1)
    assert lease is not None
    if lease_side.lapse is not None:
        lease_side.lapse(key)
    await wait_for(lambda: _gone(lease_side, key), 10, what="the agent lease to lapse")
    with pytest.raises(LeaseLost, match=rf"^agent lease {key} \(token {lease.token}\) was lost$"):
        await leases.renew_agent(lease, 30)
    next_life = await leases.hold_agent(agent, 30)
    assert next_life is not None and next_life.value.nonce != lease.value.nonce
    # The lapsed life, renewing over the new one's claim, is refused: it has no live claim of its own
    with pytest.raises(LeaseLost):
        await leases.renew_agent(lease, 30)

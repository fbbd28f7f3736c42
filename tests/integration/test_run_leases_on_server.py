"""Run and leader leases on the real server: revision-checked writes with a per-message TTL."""

from __future__ import annotations

import pytest
from nats.js import JetStreamContext

from jetcron.bus.lease import Leases
from jetcron.core.errors import LeaseLost
from jetcron.wire import subjects as s

KEY = "run.job-1.20261231T000000Z"
SHARD = s.shard_lease_key(3)


@pytest.fixture
def leases(topology_js: JetStreamContext) -> Leases:
    return Leases(topology_js)


async def test_a_retried_acquire_finds_its_own_lease_and_rearms_it(leases: Leases) -> None:
    # Given an agent's acquire that landed on the server, though the agent never saw the ack (a timeout)
    first = await leases.acquire(KEY, "agent-1", 30, attempt=1)
    assert first is not None

    # When its retry (the redelivered assignment) asks again, for the same attempt
    again = await leases.acquire(KEY, "agent-1", 30, attempt=1)

    # Then it holds the lease, re-armed by a newer write: the earlier token fences nothing of ours any more
    assert again is not None and again.token > first.token
    assert (again.value.holder, again.value.attempt) == ("agent-1", 1)
    with pytest.raises(LeaseLost, match=f"lease {KEY} \\(token {first.token}\\) was lost"):
        await leases.renew(first, 30)
    assert (await leases.renew(again, 30)).token > again.token


async def test_a_lease_held_by_another_holder_or_for_another_attempt_is_not_taken(leases: Leases) -> None:
    held = await leases.acquire(KEY, "agent-1", 30, attempt=1)
    assert held is not None
    assert await leases.acquire(KEY, "agent-2", 30, attempt=1) is None  # someone else
    assert await leases.acquire(KEY, "agent-1", 30, attempt=2) is None  # ours, but an older attempt's
    current = await leases.read(KEY)
    assert current is not None and current.token == held.token  # neither refusal wrote anything


async def test_a_leader_lease_is_never_adopted_by_a_second_process_with_the_same_name(leases: Leases) -> None:
    # Two trigger replicas configured with one name (attempt 0: a leader or shard lease) must not both hold it
    held = await leases.acquire(SHARD, "trigger-a", 30)
    assert held is not None
    assert await leases.acquire(SHARD, "trigger-a", 30) is None
    current = await leases.read(SHARD)
    assert current is not None and current.token == held.token


async def test_a_released_lease_goes_to_the_next_holder(leases: Leases) -> None:
    held = await leases.acquire(KEY, "agent-1", 30, attempt=1)
    assert held is not None
    await leases.release(held)
    taken = await leases.acquire(KEY, "agent-2", 30, attempt=2)
    assert taken is not None and taken.value.holder == "agent-2"

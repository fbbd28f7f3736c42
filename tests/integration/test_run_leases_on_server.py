"""Run and leader leases on the real server: revision-checked writes with a per-message TTL."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from nats.js import JetStreamContext

from jetcron.bus import lease as lease_store
from jetcron.bus.lease import Lease, Leases
from jetcron.core.errors import LeaseLost
from jetcron.wire import subjects as s

KEY = "run.job-1.20261231T000000Z"
SHARD = s.shard_lease_key(3)
ACTED = datetime(2026, 12, 31, 23, 59, 58, tzinfo=UTC)


@pytest.fixture
def leases(topology_js: JetStreamContext) -> Leases:
    return lease_store.on_server(topology_js)


async def assert_lost(leases: Leases, lease: Lease) -> None:
    """The lease is fenced: its holder's next renewal fails, naming the key and the token it held."""
    with pytest.raises(LeaseLost, match=f"lease {lease.key} \\(token {lease.token}\\) was lost"):
        await leases.renew(lease, 30)


def assert_written_over(new: Lease | None, old: Lease, holder: str, attempt: int) -> None:
    """`new` is held by `holder` for `attempt`, written after `old`."""
    assert new is not None and new.token > old.token
    assert (new.value.holder, new.value.attempt) == (holder, attempt)


async def assert_held_at(leases: Leases, token: int, key: str = KEY) -> None:
    """The last write to the key is still the one at `token` (nothing wrote over it)."""
    current = await leases.read(key)
    assert current is not None and current.token == token


async def test_a_retried_acquire_finds_its_own_lease_and_rearms_it(leases: Leases) -> None:
    # Given an agent's acquire that landed on the server, though the agent never saw the ack (a timeout)
    first = await leases.acquire(KEY, "agent-1", 30, attempt=1)
    assert first is not None

    # When its retry (the redelivered assignment) asks again, for the same attempt
    again = await leases.acquire(KEY, "agent-1", 30, attempt=1)

    # Then it holds the lease, re-armed by a newer write: the earlier token fences nothing of ours any more
    assert_written_over(again, first, "agent-1", 1)
    await assert_lost(leases, first)
    assert again is not None and (await leases.renew(again, 30)).token > again.token


async def test_a_lease_held_by_another_holder_or_for_another_attempt_is_not_taken(leases: Leases) -> None:
    held = await leases.acquire(KEY, "agent-1", 30, attempt=1)
    assert held is not None
    assert await leases.acquire(KEY, "agent-2", 30, attempt=1) is None  # someone else
    assert await leases.acquire(KEY, "agent-1", 30, attempt=2) is None  # ours, but an older attempt's
    await assert_held_at(leases, held.token)  # neither refusal wrote anything


async def test_a_newer_attempt_takes_the_lease_from_an_older_one_which_is_then_fenced(leases: Leases) -> None:
    # Given attempt 1's lease, not released yet (its failure report went out first)
    old = await leases.acquire(KEY, "agent-1", 30, attempt=1)
    assert old is not None

    # When attempt 2, assigned from the run record, asks for it on another agent
    new = await leases.take(KEY, "agent-2", 30, attempt=2)

    # Then it holds it, and attempt 1 can neither renew nor release it any more
    assert_written_over(new, old, "agent-2", 2)
    await assert_lost(leases, old)
    await leases.release(old)
    await assert_held_at(leases, new.token)
    # And an assignment of an older attempt, or of this one elsewhere, takes nothing
    assert await leases.take(KEY, "agent-3", 30, attempt=1) is None
    assert await leases.take(KEY, "agent-3", 30, attempt=2) is None
    await assert_held_at(leases, new.token)


async def test_take_looks_again_when_the_older_holder_releases_in_between(leases: Leases,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    # Given attempt 1's lease, whose release lands just after attempt 2's acquire found it held
    old = await leases.acquire(KEY, "agent-1", 30, attempt=1)
    assert old is not None
    supersede = leases.supersede

    async def released_first(*args: Any, **kwargs: Any) -> Lease | None:
        await leases.release(old)
        return await supersede(*args, **kwargs)

    monkeypatch.setattr(leases, "supersede", released_first)

    # When attempt 2 takes the lease
    new = await leases.take(KEY, "agent-2", 30, attempt=2)

    # Then it gets it (the supersede found it free and gave up; the next acquire wins)
    assert new is not None and (new.value.holder, new.value.attempt) == ("agent-2", 2)


async def test_a_leader_lease_is_never_adopted_by_a_second_process_with_the_same_name(leases: Leases) -> None:
    # Two trigger replicas configured with one name (attempt 0: a leader or shard lease) must not both hold it
    held = await leases.acquire(SHARD, "trigger-a", 30)
    assert held is not None
    assert await leases.acquire(SHARD, "trigger-a", 30) is None
    await assert_held_at(leases, held.token, key=SHARD)


async def test_a_released_lease_goes_to_the_next_holder(leases: Leases) -> None:
    held = await leases.acquire(KEY, "agent-1", 30, attempt=1)
    assert held is not None
    await leases.release(held)
    taken = await leases.acquire(KEY, "agent-2", 30, attempt=2)
    assert taken is not None and taken.value.holder == "agent-2"


async def test_a_contender_reads_the_holders_last_action_in_its_renewal_and_in_its_release_marker(
        leases: Leases) -> None:
    # The takeover gap is measured from it (jetcron.core.lifecycle.takeover): a renewal and a release carry the stamp
    held, found = await leases.contend(SHARD, "trigger-a", 30)
    assert held is not None and found is None
    held = await leases.renew(held, 30, acted_at=ACTED)
    lost, found = await leases.contend(SHARD, "trigger-b", 30)
    assert lost is None and found is not None and (found.value.holder, found.value.acted_at) == ("trigger-a", ACTED)
    await leases.release(held, acted_at=ACTED + timedelta(seconds=1))
    won, found = await leases.contend(SHARD, "trigger-b", 30)
    assert won is not None and won.value.holder == "trigger-b"
    assert found is not None and (found.value.holder, found.value.acted_at) == ("", ACTED + timedelta(seconds=1))


async def test_leader_and_shard_leases_live_apart_from_run_leases(leases: Leases,
                                                                 topology_js: JetStreamContext) -> None:
    # Given a run lease, a shard lease and the placement leader lease
    run = await leases.acquire(KEY, "agent-1", 30, attempt=1)
    shard = await leases.acquire(SHARD, "trigger-a", 30)
    leader = await leases.acquire(s.PLACEMENT_LEADER_KEY, "placement-a", 30)
    assert run is not None and shard is not None and leader is not None

    # Then the run lease is the only message of the run-lease stream, and the other two are in a stream of
    # their own (a herd's run-lease writes cannot queue ahead of a leader's renewal)
    runs = await topology_js.stream_info(f"KV_{s.BUCKET_LEASES}", subjects_filter=">")
    leaders = await topology_js.stream_info(f"KV_{s.BUCKET_LEADERS}", subjects_filter=">")
    claim = s.lease_subject(KEY, "agent-1")  # a run lease is stored as its writer's claim
    assert set(runs.state.subjects or {}) == {claim}
    assert set(leaders.state.subjects or {}) == {f"$KV.{s.BUCKET_LEADERS}.{SHARD}",
                                                 f"$KV.{s.BUCKET_LEADERS}.{s.PLACEMENT_LEADER_KEY}"}
    # And each reads back, renews and lists from where it lives
    assert [await leases.keys(s.SHARD_LEASES), await leases.keys("run.>")] == [
        [SHARD], [claim.removeprefix(f"$KV.{s.BUCKET_LEASES}.")]]
    for held in (run, shard, leader):
        again = await leases.read(held.key)
        assert again is not None and again.token == held.token
        assert (await leases.renew(held, 30)).token > held.token


@pytest.mark.parametrize("key", [KEY, SHARD], ids=["run_lease", "shard_lease"])
async def test_a_renewal_whose_ack_was_lost_is_adopted_by_the_next_one(leases: Leases, key: str) -> None:
    # Given a lease whose renewal landed on the server while its holder never saw the ack (it kept the old token)
    held = await leases.acquire(key, "holder-a", 30, attempt=1 if key == KEY else 0)
    assert held is not None
    landed = await leases.renew(held, 30)

    # When the holder renews again from the token it knows
    again = await leases.renew(held, 30)

    # Then the landed write is recognised as its own (same nonce) and re-armed over: still held, newer token
    assert again.token > landed.token
    current = await leases.read(key)
    assert current is not None and current.token == again.token and current.value.nonce == held.value.nonce


async def test_a_renewal_after_a_revoke_or_a_new_holder_of_the_same_name_is_lost(leases: Leases) -> None:
    # Given a shard lease given up and taken by a second process configured with the same name
    first = await leases.acquire(SHARD, "trigger-a", 30)
    assert first is not None
    await leases.release(first)
    second = await leases.acquire(SHARD, "trigger-a", 30)
    assert second is not None and second.value.nonce != first.value.nonce

    # Then the first process's renewal is refused: the stored lease is not one of its writes
    await assert_lost(leases, first)

    # And a revoked run lease is lost to its holder, however the holder's last renewal went
    run = await leases.acquire(KEY, "agent-1", 30, attempt=1)
    assert run is not None
    await leases.revoke(KEY, "cancelled", 30)
    await assert_lost(leases, run)
    current = await leases.read(KEY)  # still the revoke marker: nobody was re-armed over it
    assert current is not None and (current.value.holder, current.value.revoked) == ("", "cancelled")


async def test_a_run_lease_is_one_claim_per_writer_and_any_newer_claim_fences_the_holder(leases: Leases) -> None:
    # Given agent-1 holding attempt 1, and agent-2 placed on attempt 2 (agent-1 stalled)
    first = await leases.acquire(KEY, "agent-1", 30, attempt=1)
    assert first is not None and first.writer == "agent-1"
    second = await leases.take(KEY, "agent-2", 30, attempt=2)

    # Then agent-2's claim is stored under its own name beside agent-1's, and is the lease
    assert_written_over(second, first, "agent-2", 2)
    current = await leases.read(KEY)
    assert current is not None and (current.writer, current.token) == ("agent-2", second.token)
    # And agent-1's renewal is fenced, although its own claim is still stored: the check spans every writer's
    await assert_lost(leases, first)
    assert s.lease_subject(KEY, "agent-1") != s.lease_subject(KEY, "agent-2")


async def test_a_fenced_holders_claim_never_becomes_the_lease_again(leases: Leases) -> None:
    # Given agent-1's claim for 3 s, superseded by agent-2, whose run ends at once: it releases its lease
    first = await leases.acquire(KEY, "agent-1", 3, attempt=1)
    assert first is not None
    second = await leases.take(KEY, "agent-2", 3, attempt=2)
    assert second is not None
    await leases.release(second)

    # Then the release marker outlives agent-1's older claim (a one-second marker would have left it the last
    # message, and agent-1's next renewal would have passed its revision check)
    marker = await leases.read(KEY)
    assert marker is not None and marker.value.holder == "" and marker.writer == "agent-2"
    assert marker.ttl is not None and marker.ttl >= 4
    await asyncio.sleep(1.5)  # the server's TTL clock: past the old one-second marker
    await assert_lost(leases, first)
    # And a revoke written over agent-1's claim outlives it too
    third = await leases.take(KEY, "agent-3", 3, attempt=3)
    assert third is not None
    await leases.revoke(KEY, "cancelled", 1)
    revoked = await leases.read(KEY)
    assert revoked is not None and revoked.writer == s.LEASE_REVOKER and (revoked.ttl or 0) >= 4

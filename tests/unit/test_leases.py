"""Run lease timing: the first grant covers a staged run's wait; renewals at TTL/3; the agent fences itself
before the server can have expired the lease."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from jetcron.core.leases import fence_at, first_grant, renew_at
from jetcron.wire import subjects as s

NOW = datetime(2026, 3, 8, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(("due_in", "granted"), [
    pytest.param(-30.0, 10.0, id="overdue_run_gets_the_plain_ttl"),
    pytest.param(0.0, 10.0, id="due_now_gets_the_plain_ttl"),
    pytest.param(5.5, 15.5, id="staged_run_gets_its_wait_on_top"),
    pytest.param(90.0, 100.0, id="herd_staged_90s_ahead"),
])
def test_first_grant_covers_the_wait_until_the_due_time(due_in: float, granted: float) -> None:
    assert first_grant(10.0, NOW + timedelta(seconds=due_in), NOW) == granted


@pytest.mark.parametrize(("due_in", "queued", "granted"), [
    pytest.param(60.0, 0, 70.0, id="first_of_a_herd"),
    pytest.param(60.0, 50_000, 170.0, id="behind_50000_at_500_per_s"),
    pytest.param(0.0, 50_000, 10.0, id="due_now_is_not_queued"),
])
def test_a_staged_grant_covers_its_place_in_the_agents_queue(due_in: float, queued: int, granted: float) -> None:
    assert first_grant(10.0, NOW + timedelta(seconds=due_in), NOW, queued=queued, start_rate=500.0) == granted


def test_a_plain_lease_is_renewed_at_a_third_of_its_ttl() -> None:
    assert renew_at(100.0, 9.0, 9.0) == pytest.approx(103.0)


def test_a_staged_lease_is_first_renewed_a_third_of_the_ttl_after_its_due_time() -> None:
    # Written at t=100 for a run due at t=105.5: no renewal while it waits, the first at 105.5 + TTL/3
    granted = first_grant(9.0, NOW + timedelta(seconds=5.5), NOW)
    assert renew_at(100.0, granted, 9.0) == pytest.approx(105.5 + 3.0)


@pytest.mark.parametrize(("ttl", "margin"), [(3.0, 0.6), (10.0, 2.0), (60.0, 2.0), (2.0, 0.5)])
def test_the_agent_fences_a_margin_before_expiry_and_after_its_renewal_time(ttl: float, margin: float) -> None:
    for granted in (ttl, ttl + 30.0):
        assert fence_at(100.0, granted, ttl) == pytest.approx(100.0 + granted - margin)
        assert renew_at(100.0, granted, ttl) < fence_at(100.0, granted, ttl)


@pytest.mark.parametrize(("key", "bucket"), [
    pytest.param(s.run_lease_key("nightly.20261202T000000Z"), s.BUCKET_LEASES, id="run_lease"),
    pytest.param(s.gang_lease_key("train.20261202T000000Z", "gpu-7"), s.BUCKET_LEASES, id="gang_member_lease"),
    pytest.param("run.>", s.BUCKET_LEASES, id="run_lease_pattern"),
    pytest.param(s.shard_lease_key(3), s.BUCKET_LEADERS, id="trigger_shard"),
    pytest.param(s.SHARD_LEASES, s.BUCKET_LEADERS, id="trigger_shard_pattern"),
    pytest.param(s.trigger_member_key("trigger-a"), s.BUCKET_LEADERS, id="trigger_member"),
    pytest.param(s.PLACEMENT_LEADER_KEY, s.BUCKET_LEADERS, id="placement_leader"),
    pytest.param(s.TRACKER_LEADER_KEY, s.BUCKET_LEADERS, id="tracker_leader"),
])
def test_run_leases_and_leader_leases_live_in_separate_buckets(key: str, bucket: str) -> None:
    assert s.lease_bucket(key) == bucket


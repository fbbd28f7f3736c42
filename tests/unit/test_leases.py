"""Run lease timing: the first grant covers a staged run's wait; renewals at TTL/3; the agent fences itself
before the server can have expired the lease."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from jetcron.core.lifecycle import leases
from jetcron.core.lifecycle.leases import fence_at, first_grant, renew_at
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



@pytest.mark.parametrize(("ttl", "older_until", "now", "expected"), [
    (10.0, 0.0, 100.0, 10.0),     # no older claim: the TTL asked for
    (1.0, 130.0, 100.0, 31.0),    # a one-second release marker over a claim stored 30 s more: a second past it
    (10.0, 105.0, 100.0, 10.0),   # the older claim goes first anyway
    (10.0, 95.0, 100.0, 10.0),    # already gone
])
def test_a_claim_written_over_another_outlives_it(ttl: float, older_until: float, now: float,
                                                  expected: float) -> None:
    assert leases.outlasting(ttl, older_until, now) == expected


@pytest.mark.parametrize(("writer", "holder", "attempt", "assigned", "current", "foreign"), [
    ("agent-a", "agent-a", 2, "agent-a", 2, False),   # the attempt's own agent
    ("agent-a", "agent-a", 1, "agent-b", 2, False),   # an older attempt's agent, its release still to come
    ("agent-b", "agent-b", 2, "agent-a", 2, True),    # the current attempt, claimed by an agent placed elsewhere
    ("agent-b", "agent-b", 9, "agent-a", 2, True),    # a later attempt nobody placed
    ("agent-b", "agent-a", 2, "agent-a", 2, True),    # under another agent's name
    ("agent-b", "agent-b", 2, None, 2, True),         # a run placed on nobody yet
    ("", "agent-b", 2, "agent-a", 2, False),          # a lease stored as one subject: no writer to judge
])
def test_a_foreign_claim_is_one_no_honest_agent_writes(writer: str, holder: str, attempt: int,
                                                       assigned: str | None, current: int, foreign: bool) -> None:
    assert leases.foreign_claim(writer, holder, attempt, assigned, current) is foreign


def test_a_run_lease_is_stored_as_its_writers_claim_and_read_across_all_of_them() -> None:
    key = s.run_lease_key("acme.nightly.20260101T000000000Z")
    claim = s.lease_subject(key, "agent-a")
    assert claim == "$KV.jc_leases.run.agent-a.acme.nightly.20260101T000000000Z"
    assert s.lease_filter(key) == "$KV.jc_leases.run.*.acme.nightly.20260101T000000000Z"
    assert s.lease_writer(claim) == "agent-a"
    # leader and shard leases, and gang members' leases, stay one subject each
    assert s.lease_subject(s.PLACEMENT_LEADER_KEY, "placement-a") == s.lease_filter(s.PLACEMENT_LEADER_KEY)
    assert s.lease_writer(s.lease_subject(s.shard_lease_key(3), "trigger-a")) == ""
    gang = s.gang_lease_key("acme.nightly.20260101T000000000Z", "agent-b")
    assert s.lease_subject(gang, "agent-b") == "$KV.jc_leases.gang.agent-b.acme.nightly.20260101T000000000Z"


def test_a_lease_buckets_first_token_is_the_time_in_microseconds_and_grows_with_it() -> None:
    at = datetime(2026, 12, 4, 19, 30, 0, 123456, tzinfo=UTC)
    assert leases.fencing_floor(at) == 1_796_412_600_123_456
    assert leases.fencing_floor(at + timedelta(microseconds=1)) == leases.fencing_floor(at) + 1
    assert leases.fencing_floor(at.astimezone(timezone(timedelta(hours=-5)))) == leases.fencing_floor(at)
    assert leases.fencing_floor(datetime(2250, 1, 1, tzinfo=UTC)) < 2**53  # exact as a JSON number for centuries

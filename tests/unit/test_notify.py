"""The pure part of notifications: events from a record, targets, signatures, tries, deadlines."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec
import pytest

from jetcron.core.errors import InvalidSpec
from jetcron.core.lifecycle.notify import (
    DELIVERED,
    PARKED,
    PENDING,
    Delivery,
    DeliveryAttempt,
    address_allowed,
    after_try,
    delivery_key,
    job_deliveries,
    missed_deadlines,
    notices,
    reached_address,
    redelivered,
    sign,
    verify,
)
from jetcron.core.models import AttemptRecord, JobSpec, NotifyEvent, RetryPolicy, Run, RunState
from jetcron.core.validate import decode_spec, validate_spec

T0 = datetime(2026, 12, 3, 10, 0, tzinfo=UTC)


def _run(state: RunState = RunState.RUNNING, **kw: Any) -> Run:
    base: dict[str, Any] = dict(run_id="acme.nightly.20261203T100000000Z", job="acme.nightly", tenant="acme",
                                state=state, scheduled_at=T0, due_at=T0, created_at=T0)
    return Run(**(base | kw))


def _spec(**kw: Any) -> JobSpec:
    return decode_spec({"name": "nightly", "command": ["true"], "tenant": "acme",
                        "schedule": {"kind": "cron", "cron": "*/5 * * * *"}} | kw)


def test_a_record_holds_every_event_so_far_with_stable_ids() -> None:
    failed = AttemptRecord(attempt=1, outcome="failed", exit_code=3, started_at=T0, finished_at=T0)
    timed_out = AttemptRecord(attempt=2, outcome="timed_out", exit_code=None, started_at=T0, finished_at=T0)
    run = _run(RunState.DEAD, attempt=2, history=[failed, timed_out], missed=["finish"])
    got = [(n.event, n.attempt, n.id) for n in notices(run)]
    assert got == [
        (NotifyEvent.FAILED, 1, f"{run.run_id}.failed-1"),
        (NotifyEvent.FAILED, 2, f"{run.run_id}.failed-2"),
        (NotifyEvent.TIMED_OUT, 2, f"{run.run_id}.timed_out-2"),
        (NotifyEvent.DEAD, 2, f"{run.run_id}.dead-0"),
        (NotifyEvent.FINISH_MISSED, 2, f"{run.run_id}.finish_missed-0"),
    ]
    # the job as its owner names it, the tenant beside it; no command, env or spec in the payload
    dead = notices(run)[3]
    assert (dead.job, dead.tenant) == ("nightly", "acme")
    assert set(msgspec.to_builtins(dead)) >= {"id", "event", "run_id", "state"}
    assert "spec" not in msgspec.to_builtins(dead) and "env" not in msgspec.json.encode(dead).decode()


@pytest.mark.parametrize(("state", "reason", "event"), [
    (RunState.SUCCEEDED, "", NotifyEvent.SUCCEEDED),
    (RunState.FAILED, "exit code 2 is not retryable", NotifyEvent.DEAD),
    (RunState.BLOCKED, "upstream a ended dead", NotifyEvent.BLOCKED),
    (RunState.SKIPPED, "overlap: x still active (policy skip)", NotifyEvent.SKIPPED),
])
def test_terminal_states_and_their_events(state: RunState, reason: str, event: NotifyEvent) -> None:
    (notice,) = notices(_run(state, reason=reason))
    assert notice.event is event and notice.reason == reason


def test_a_live_run_holds_no_event() -> None:
    assert notices(_run(RunState.RUNNING)) == []


def test_delivery_keys_list_by_job_and_never_match_another_tenants_job() -> None:
    key = delivery_key("nightly.20261203T100000000Z.dead-0", 0)
    other = delivery_key("acme.nightly.20261203T100000000Z.dead-0", 0)
    pattern = job_deliveries("nightly").split(".")
    assert len(key.split(".")) == len(pattern) and len(other.split(".")) != len(pattern)


def test_signatures_verify_and_a_changed_body_or_old_timestamp_does_not() -> None:
    header = sign(b"s3cret", 1_000_000, b'{"a":1}')
    assert header.startswith("t=1000000,v1=")
    assert verify(b"s3cret", header, b'{"a":1}', now=1_000_010)
    assert not verify(b"s3cret", header, b'{"a":2}', now=1_000_010)
    assert not verify(b"other", header, b'{"a":1}', now=1_000_010)
    assert not verify(b"s3cret", header, b'{"a":1}', now=1_000_000 + 301)


def _tried(ok: bool, at: datetime) -> DeliveryAttempt:
    return DeliveryAttempt(at=at, ok=ok, error="" if ok else "HTTP 500")


def test_tries_back_off_then_park_and_a_redelivery_gets_a_fresh_budget() -> None:
    policy = RetryPolicy(initial_seconds=1.0, multiplier=2.0, max_delay_seconds=300.0, jitter=0.0)
    (notice,) = notices(_run(RunState.DEAD))
    d = Delivery(delivery_id="x-0", notice=notice, rule=0, target="webhook https://h", state=PENDING,
                 created_at=T0, updated_at=T0)
    rng = random.Random(1)
    waits = []
    for i in range(3):
        d = after_try(d, _tried(False, T0 + timedelta(seconds=i)), max_attempts=3, policy=policy, rng=rng)
        waits.append(None if d.next_at is None else (d.next_at - d.updated_at).total_seconds())
    assert waits == [1.0, 2.0, None] and d.state == PARKED and len(d.attempts) == 3
    d = redelivered(d, T0 + timedelta(minutes=1))
    assert (d.state, d.budget_from, d.next_at) == (PENDING, 3, None)
    d = after_try(d, _tried(True, T0 + timedelta(minutes=1)), max_attempts=3, policy=policy, rng=rng)
    assert d.state == DELIVERED and len(d.attempts) == 4


@pytest.mark.parametrize(("rule", "field", "problem"), [
    ({"on": ["dead"], "webhook": "ftp://example.com/x"}, "notify[0].webhook", "unsupported scheme 'ftp'"),
    ({"on": ["dead"], "webhook": "not a url"}, "notify[0].webhook", "unsupported scheme ''"),
    ({"on": ["dead"], "webhook": "https://127.0.0.1:8080/hook"}, "notify[0].webhook", "loopback, private"),
    ({"on": ["dead"], "webhook": "http://169.254.169.254/latest"}, "notify[0].webhook", "loopback, private"),
    ({"on": ["dead"], "webhook": "http://10.1.2.3/x"}, "notify[0].webhook", "loopback, private"),
    ({"on": ["dead"], "webhook": "http://[::1]/x"}, "notify[0].webhook", "loopback, private"),
    ({"on": ["dead"], "webhook": "http://[64:ff9b::a9fe:a9fe]/x"}, "notify[0].webhook", "NAT64, 6to4"),
    ({"on": ["dead"], "webhook": "http://[2002:a00:1::]/x"}, "notify[0].webhook", "NAT64, 6to4"),
    ({"on": ["dead"], "webhook": "http://localhost/x"}, "notify[0].webhook", "is this host"),
    ({"on": ["dead"], "webhook": "https://example.com:99999/x"}, "notify[0].webhook", "not a valid URL"),
    ({"on": ["dead"], "webhook": "https://user:pw@example.com/x"}, "notify[0].webhook", "carries credentials"),
    ({"on": ["dead"], "webhook": "https:///x"}, "notify[0].webhook", "names no host"),
    ({"on": [], "webhook": "https://example.com/x"}, "notify[0].on", "names no event"),
    ({"on": ["dead", "dead"], "webhook": "https://example.com/x"}, "notify[0].on", "names an event twice"),
    ({"on": ["dead"]}, "notify[0]", "exactly one target"),
    ({"on": ["dead"], "webhook": "https://example.com/x", "email": "a@example.com"}, "notify[0]",
     "exactly one target"),
    ({"on": ["dead"], "subject": "a..b"}, "notify[0].subject", "dot-separated tokens"),
    ({"on": ["dead"], "subject": "ops.>"}, "notify[0].subject", "dot-separated tokens"),
    ({"on": ["dead"], "email": "nobody"}, "notify[0].email", "not an email address"),
    ({"on": ["dead"], "email": "ops@example.com"}, "notify[0].email", "no SMTP server"),
    ({"on": ["dead"], "subject": "ops", "secret": "KEY"}, "notify[0].secret", "signs webhooks only"),
])
def test_bad_rules_name_the_field(rule: dict[str, Any], field: str, problem: str) -> None:
    with pytest.raises(InvalidSpec) as caught:
        validate_spec(_spec(notify=[rule]), now=T0)
    assert caught.value.field == field and problem in caught.value.problem, str(caught.value)


ADDRESSES = [
    ("127.0.0.1", "127.0.0.1", False),
    ("10.1.2.3", "10.1.2.3", False),
    ("172.16.0.1", "172.16.0.1", False),
    ("192.168.1.1", "192.168.1.1", False),
    ("100.64.0.1", "100.64.0.1", False),
    ("169.254.169.254", "169.254.169.254", False),
    ("0.0.0.0", "0.0.0.0", False),
    ("224.0.0.1", "224.0.0.1", False),
    ("::1", "::1", False),
    ("::", "::", False),
    ("fc00::1", "fc00::1", False),
    ("fe80::1%eth0", "fe80::1%eth0", False),
    ("ff02::1", "ff02::1", False),
    ("::ffff:127.0.0.1", "127.0.0.1", False),
    ("::ffff:0:7f00:1", "127.0.0.1", False),
    ("::7f00:1", "127.0.0.1", False),
    ("64:ff9b::7f00:1", "127.0.0.1", False),
    ("64:ff9b::a9fe:a9fe", "169.254.169.254", False),
    ("64:ff9b::a00:1", "10.0.0.1", False),
    ("64:ff9b:1::a9fe:a9fe", None, False),
    ("2002:7f00:1::", "127.0.0.1", False),
    ("2002:a9fe:a9fe::1", "169.254.169.254", False),
    ("2001:0:4136:e378:8000:63bf:3fff:fdd2", None, False),
    ("8.8.8.8", "8.8.8.8", True),
    ("2606:4700:4700::1111", "2606:4700:4700::1111", True),
    ("::ffff:8.8.8.8", "8.8.8.8", True),
    ("64:ff9b::808:808", "8.8.8.8", True),
    ("2002:808:808::", "8.8.8.8", True),
]
"""(address, the address it reaches, allowed as a webhook's)"""


@pytest.mark.parametrize(("address", "reaches", "allowed"), ADDRESSES, ids=[row[0] for row in ADDRESSES])
def test_an_address_is_judged_by_the_one_it_reaches(address: str, reaches: str | None, allowed: bool) -> None:
    """Translated, tunnelled and mapped IPv6 forms pass is_global whatever IPv4 address they lead to: what is
    judged is the address a connection ends up at (None where that cannot be told: refused)."""
    got = reached_address(address)
    assert (None if got is None else str(got)) == reaches
    assert address_allowed(address, allow_private=False) is allowed
    assert address_allowed(address, allow_private=True)


def test_an_unknown_event_is_refused_when_decoded() -> None:
    with pytest.raises(InvalidSpec) as caught:
        _spec(notify=[{"on": ["exploded"], "webhook": "https://example.com/x"}])
    assert caught.value.field == "spec.notify[0].on[0]" and "exploded" in str(caught.value)


def test_private_targets_and_email_pass_when_the_deployment_allows_them() -> None:
    spec = _spec(notify=[{"on": ["dead"], "webhook": "http://127.0.0.1:9/x", "secret": "HOOK_KEY"},
                         {"on": ["failed", "start_missed"], "email": "ops@example.com"},
                         {"on": ["blocked"], "subject": "ops.alerts"}])
    validate_spec(spec, now=T0, allow_private_targets=True, email_enabled=True)


@pytest.mark.parametrize(("fields", "field", "problem"), [
    ({"start_deadline_seconds": -1}, "start_deadline_seconds", "positive"),
    ({"finish_deadline_seconds": 0}, "finish_deadline_seconds", "positive"),
    ({"start_deadline_seconds": 301}, "start_deadline_seconds", "longer than the schedule's period (300 s)"),
    ({"finish_deadline_seconds": 31 * 86400}, "finish_deadline_seconds", "at most 30 days"),
])
def test_bad_deadlines_name_the_field(fields: dict[str, Any], field: str, problem: str) -> None:
    with pytest.raises(InvalidSpec) as caught:
        validate_spec(_spec(**fields), now=T0)
    assert caught.value.field == field and problem in caught.value.problem, str(caught.value)


def test_deadlines_missed_by_when() -> None:
    spec = _spec(start_deadline_seconds=60, finish_deadline_seconds=120)
    waiting = _run(RunState.SCHEDULED)
    assert missed_deadlines(waiting, spec, T0 + timedelta(seconds=59)) == []
    assert missed_deadlines(waiting, spec, T0 + timedelta(seconds=60)) == ["start"]
    late = _run(RunState.RUNNING, started_at=T0 + timedelta(seconds=61))
    assert missed_deadlines(late, spec, T0 + timedelta(seconds=62)) == ["start"]
    assert missed_deadlines(late, spec, T0 + timedelta(seconds=182)) == ["start", "finish"]
    recorded = msgspec.structs.replace(late, missed=["start"])
    assert missed_deadlines(recorded, spec, T0 + timedelta(seconds=182)) == ["finish"]
    quick = _run(RunState.SUCCEEDED, started_at=T0, finished_at=T0 + timedelta(seconds=5))
    assert missed_deadlines(quick, spec, T0 + timedelta(hours=1)) == []
    # skipped (not by a pause) misses its start at once; cancelled, blocked and paused-away miss nothing
    assert missed_deadlines(_run(RunState.SKIPPED, reason="overlap: x"), spec, T0) == ["start"]
    for state, reason in ((RunState.SKIPPED, "paused: job paused"), (RunState.CANCELLED, ""),
                          (RunState.BLOCKED, "upstream")):
        assert missed_deadlines(_run(state, reason=reason), spec, T0 + timedelta(hours=1)) == []
    assert missed_deadlines(waiting, _spec(), T0 + timedelta(days=1)) == []

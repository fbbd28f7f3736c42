"""Preemption's decision (jetcron.core.placing.preemption) as tables: who may be preempted, which runs are chosen, and
the guards that keep a run from it. The carrying out is tested in test_placement_preemption.py and on the server."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import msgspec
import pytest

from jetcron.core.errors import InvalidSpec
from jetcron.core.lifecycle import retry
from jetcron.core.lifecycle.run_state import TRANSITIONS, RunEvent, RunState
from jetcron.core.lifecycle.runs import Change, apply
from jetcron.core.models import (
    AttemptRecord,
    JobSpec,
    Preemption,
    Priority,
    QueueQuota,
    Resources,
    RetryPolicy,
    Run,
    TenantPolicy,
)
from jetcron.core.placing.preemption import (
    Amount,
    Guards,
    Holder,
    Host,
    choose,
    eligible,
    guards_for,
    validate_preemption,
)

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
DEFAULTS = Guards(max_preemptions=3, min_runtime_seconds=60.0, grace_seconds=30.0)
OPEN = Guards(max_preemptions=3, min_runtime_seconds=0.0, grace_seconds=5.0)
G8 = Amount(1000, 1024, 8)


def gpu(n: int) -> Amount:
    return Amount(1000, 1024, n)


def host(agent: str, free: Amount = Amount(8000, 65536, 0), *, leaf: str | None = "l1", slots: int | None = None,
         open_: bool = True) -> Host:
    return Host(agent_id=agent, leaf=leaf, free=free, free_slots=slots, open=open_)


def holder(run_id: str, priority: Priority = Priority.LOW, *, holds: dict[str, Amount], ran: float = 600.0,
           preemptions: int = 0, guards: Guards | None = OPEN, tenant: str = "acme") -> Holder:
    return Holder(run_id=run_id, tenant=tenant, priority=priority, started_at=NOW - timedelta(seconds=ran),
                  preemptions=preemptions, holds=holds, guards=guards)


def wants(gpus: int = 8, hosts: int = 1, cpu: float = 1.0, memory: int = 1024) -> Resources:
    return Resources(cpu=cpu, memory_mb=memory, gpus=gpus, hosts=hosts)


def victims(plan: object) -> list[str]:
    return [] if plan is None else [v.run_id for v in plan.victims]  # type: ignore[attr-defined]


# --- the state machine ---------------------------------------------------------------------------------------------

def test_only_a_running_run_is_preempted_and_it_goes_back_to_scheduled() -> None:
    edges = {(state, event): to for (state, event), to in TRANSITIONS.items() if event is RunEvent.PREEMPT}
    assert edges == {(RunState.RUNNING, RunEvent.PREEMPT): frozenset({RunState.SCHEDULED})}


# --- who may be preempted ------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("policy", "queue", "expected"), [
    pytest.param(None, "default", None, id="no_policy_never"),
    pytest.param(TenantPolicy(tenant="a"), "default", None, id="policy_without_preemption_never"),
    pytest.param(TenantPolicy(tenant="a", preemption=Preemption()), "default", DEFAULTS, id="tenant_on_defaults"),
    pytest.param(TenantPolicy(tenant="a", preemption=Preemption(max_preemptions=1, grace_seconds=5)), "default",
                 Guards(1, 60.0, 5.0), id="tenant_guards_over_defaults"),
    pytest.param(TenantPolicy(tenant="a", preemption=Preemption(enabled=False)), "default", None,
                 id="tenant_off"),
    pytest.param(TenantPolicy(tenant="a", preemption=Preemption(),
                              queues={"interactive": QueueQuota(preemption=Preemption(enabled=False))}),
                 "interactive", None, id="queue_opts_out_of_tenant"),
    pytest.param(TenantPolicy(tenant="a", preemption=Preemption(),
                              queues={"interactive": QueueQuota(preemption=Preemption(enabled=False))}),
                 "batch", DEFAULTS, id="other_queue_keeps_tenant"),
    pytest.param(TenantPolicy(tenant="a", queues={"batch": QueueQuota(max_cpu=8, preemption=Preemption(
        min_runtime_seconds=0))}), "batch", Guards(3, 0.0, 30.0), id="queue_opts_in_alone"),
    pytest.param(TenantPolicy(tenant="a", queues={"batch": QueueQuota(max_cpu=8)}), "batch", None,
                 id="queue_quota_without_preemption_takes_tenant"),
])
def test_guards_come_from_the_queue_else_the_tenant_else_never(policy: TenantPolicy | None, queue: str,
                                                                expected: Guards | None) -> None:
    assert guards_for(policy, queue, DEFAULTS) == expected


@pytest.mark.parametrize(("h", "priority", "why"), [
    pytest.param(holder("r", Priority.LOW, holds={}), Priority.HIGH, None, id="low_by_high"),
    pytest.param(holder("r", Priority.NORMAL, holds={}), Priority.HIGH, None, id="normal_by_high"),
    pytest.param(holder("r", Priority.HIGH, holds={}), Priority.HIGH, "priority high is not lower than high",
                 id="same_priority_never"),
    pytest.param(holder("r", Priority.CRITICAL, holds={}), Priority.HIGH, "priority critical is not lower than high",
                 id="higher_never"),
    pytest.param(holder("r", holds={}, guards=None), Priority.CRITICAL,
                 "its tenant's policy does not allow preemption", id="no_policy"),
    pytest.param(holder("r", holds={}, ran=10, guards=Guards(3, 60.0, 5.0)), Priority.HIGH,
                 "ran 10s, under its minimum of 60s", id="under_min_runtime"),
    pytest.param(holder("r", holds={}, ran=60, guards=Guards(3, 60.0, 5.0)), Priority.HIGH, None,
                 id="at_min_runtime"),
    pytest.param(holder("r", holds={}, preemptions=2, guards=Guards(2, 0.0, 5.0)), Priority.HIGH,
                 "preempted 2 times already (at most 2)", id="max_preemptions_reached"),
    pytest.param(holder("r", holds={}, preemptions=1, guards=Guards(2, 0.0, 5.0)), Priority.HIGH, None,
                 id="under_max_preemptions"),
    pytest.param(holder("r", holds={}, guards=Guards(0, 0.0, 5.0)), Priority.HIGH,
                 "preempted 0 times already (at most 0)", id="max_zero_never"),
])
def test_eligible(h: Holder, priority: Priority, why: str | None) -> None:
    assert eligible(h, priority, NOW) == why


def test_a_run_not_started_is_not_preempted() -> None:
    h = Holder(run_id="r", tenant="a", priority=Priority.LOW, started_at=None, holds={}, guards=OPEN)
    assert eligible(h, Priority.CRITICAL, NOW) == "not started"


# --- which runs --------------------------------------------------------------------------------------------------

FULL = [host("a1"), host("a2")]  # two 8-GPU hosts, every GPU taken


@pytest.mark.parametrize(("hosts", "holders", "res", "expected", "reason"), [
    pytest.param(FULL, [holder("low", holds={"a1": G8})], wants(8), ["low"],
                 "preempting run low (low) to free 8 GPUs on a1", id="one_for_one"),
    pytest.param(FULL, [holder("normal", Priority.NORMAL, holds={"a1": G8}), holder("low", holds={"a2": G8})],
                 wants(8), ["low"], "preempting run low (low) to free 8 GPUs on a2", id="lowest_priority_first"),
    pytest.param(FULL, [holder("old", holds={"a1": G8}, ran=3600), holder("new", holds={"a2": G8}, ran=120)],
                 wants(8), ["new"], "preempting run new (low) to free 8 GPUs on a2", id="most_recent_first"),
    pytest.param([host("a1")], [holder("x", holds={"a1": gpu(4)}, ran=100), holder("y", holds={"a1": gpu(4)}, ran=50)],
                 wants(8), ["y", "x"], "preempting runs y (low), x (low) to free 8 GPUs on a1",
                 id="two_halves_for_a_whole"),
    pytest.param([host("a1", Amount(8000, 65536, 4))], [holder("x", holds={"a1": gpu(4)}, ran=100),
                                                        holder("y", holds={"a1": gpu(2)}, ran=50),
                                                        holder("z", holds={"a1": gpu(2)}, ran=10)],
                 wants(8), ["z", "y"], "preempting runs z (low), y (low) to free 4 GPUs on a1",
                 id="the_newest_that_free_enough"),
    pytest.param([host("a1", Amount(8000, 65536, 4))], [holder("x", holds={"a1": gpu(4)}, ran=100),
                                                        holder("z", holds={"a1": gpu(2)}, ran=10)],
                 wants(8), ["x"], "preempting run x (low) to free 4 GPUs on a1",
                 id="exactly_what_is_needed_one_taken_first_given_back"),
    pytest.param([host("a1", Amount(8000, 65536, 2))], [holder("x", holds={"a1": gpu(4)})], wants(8), [], "",
                 id="never_less_than_needed"),
    pytest.param(FULL, [holder("high", Priority.HIGH, holds={"a1": G8})], wants(8), [], "",
                 id="only_strictly_lower"),
    pytest.param(FULL, [holder("young", holds={"a1": G8}, ran=5, guards=Guards(3, 60.0, 5.0))], wants(8), [], "",
                 id="min_runtime_guard"),
    pytest.param(FULL, [holder("worn", holds={"a1": G8}, preemptions=3)], wants(8), [], "",
                 id="max_preemptions_guard"),
    pytest.param(FULL, [holder("free", holds={"a1": G8}, guards=None)], wants(8), [], "",
                 id="tenant_without_policy"),
    pytest.param([host("a1", open_=False), host("a2")], [holder("x", holds={"a1": G8}, ran=10),
                                                        holder("y", holds={"a2": G8}, ran=100)],
                 wants(8), ["y"], "preempting run y (low) to free 8 GPUs on a2", id="never_for_a_closed_host"),
    pytest.param([host("a1", slots=0)], [holder("x", holds={"a1": Amount(100, 64, 0)})], wants(0, cpu=0.1, memory=64),
                 ["x"], "preempting run x (low) to free 0.1 cpu and 64 MB on a1", id="a_slot"),
    pytest.param([host("a1", Amount(0, 65536, 8))], [holder("x", holds={"a1": Amount(4000, 1024, 0)})],
                 wants(0, cpu=4), ["x"], "preempting run x (low) to free 4 cpu and 1024 MB on a1", id="cpu"),
])
def test_choose(hosts: list[Host], holders: list[Holder], res: Resources, expected: list[str], reason: str) -> None:
    plan = choose("w", Priority.HIGH, res, hosts, holders, NOW)
    assert victims(plan) == expected
    if plan is not None:
        assert plan.reason == reason


# --- gangs -------------------------------------------------------------------------------------------------------

LEAVES = [host("a1"), host("a2"), host("a3"), host("b1", leaf="l2"), host("b2", leaf="l2")]


@pytest.mark.parametrize(("holders", "res", "expected", "reason"), [
    pytest.param([holder("gang", holds={"a1": G8, "a2": G8, "a3": G8})], wants(8), ["gang"],
                 "preempting run gang (low) to free 8 GPUs on a1", id="a_gang_counts_whole_for_one_host"),
    pytest.param([holder("gang", holds={"a1": G8, "a2": G8, "a3": G8}), holder("one", holds={"b1": G8})],
                 wants(8), ["one"], "preempting run one (low) to free 8 GPUs on b1",
                 id="a_gang_loses_its_time_on_every_host"),
    pytest.param([holder("gang", holds={"a1": G8, "a2": G8}), holder("x", holds={"a3": G8})],
                 wants(8, hosts=3), ["gang", "x"], "preempting runs gang (low), x (low) to free 24 GPUs on leaf l1",
                 id="a_gang_waiting_takes_a_leaf"),
    pytest.param([holder("b", holds={"b1": G8, "b2": G8}, ran=60), holder("a", holds={"a1": G8, "a2": G8, "a3": G8})],
                 wants(8, hosts=2), ["b"], "preempting run b (low) to free 16 GPUs on leaf l2",
                 id="a_gang_waiting_prefers_the_leaf_that_loses_less"),
    pytest.param([holder("x", holds={"a1": G8}), holder("y", holds={"b1": G8})], wants(8, hosts=2), [], "",
                 id="never_across_leaves"),
])
def test_gangs(holders: list[Holder], res: Resources, expected: list[str], reason: str) -> None:
    plan = choose("w", Priority.HIGH, res, LEAVES, holders, NOW)
    assert victims(plan) == expected
    if plan is not None:
        assert plan.reason == reason


def test_the_victims_reason_names_who_took_its_place() -> None:
    plan = choose("acme.train.1", Priority.CRITICAL, wants(8, hosts=2), LEAVES,
                  [holder("gang", holds={"b1": G8, "b2": G8})], NOW)
    assert plan is not None and plan.short == "gpus"
    assert plan.victim_reason() == "preempted by run acme.train.1 (critical) to free 16 GPUs on leaf l2"


# --- quotas ------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("room", "expected"), [
    pytest.param(None, ["low"], id="no_quota"),
    pytest.param(Amount(1000, 1024, 8), ["low"], id="room_for_exactly_it"),
    pytest.param(Amount(1000, 1024, 7), [], id="over_its_gpu_quota_preempts_nothing"),
    pytest.param(Amount(999, 1024, 8), [], id="over_its_cpu_quota_preempts_nothing"),
])
def test_the_waiting_run_stays_within_its_quotas(room: Amount | None, expected: list[str]) -> None:
    plan = choose("w", Priority.HIGH, wants(8), FULL, [holder("low", holds={"a1": G8})], NOW, room)
    assert victims(plan) == expected


# --- validation --------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("policy", "message"), [
    pytest.param(TenantPolicy(tenant="a", preemption=Preemption(max_preemptions=-1)),
                 r"preemption.max_preemptions: must be >= 0 and <= 1000 \(got -1\)", id="negative_max"),
    pytest.param(TenantPolicy(tenant="a", preemption=Preemption(grace_seconds=float("nan"))),
                 r"preemption.grace_seconds: must be a number >= 0", id="nan_grace"),
    pytest.param(TenantPolicy(tenant="a", queues={"batch": QueueQuota(preemption=Preemption(
        min_runtime_seconds=-5))}), r"queues.batch.preemption.min_runtime_seconds: must be a number >= 0 .*\(got -5",
        id="queue_negative_min_runtime"),
])
def test_guards_out_of_bounds_are_refused_naming_field_and_value(policy: TenantPolicy, message: str) -> None:
    with pytest.raises(InvalidSpec, match=message):
        validate_preemption(policy)


def test_sane_guards_pass() -> None:
    validate_preemption(TenantPolicy(tenant="a", preemption=Preemption(max_preemptions=2, min_runtime_seconds=60,
                                                                       grace_seconds=30)))


# --- the run record ----------------------------------------------------------------------------------------------

def _running(**kw: object) -> Run:
    base: dict[str, object] = dict(run_id="acme.train.1", job="acme.train", tenant="acme", state=RunState.RUNNING,
                                   attempt=2, scheduled_at=NOW, due_at=NOW, created_at=NOW,
                                   spec=JobSpec(name="train", command=["true"], retry=RetryPolicy(max_attempts=2)),
                                   agent="a1", agents=["a1", "a2"], token=9, started_at=NOW - timedelta(minutes=5),
                                   history=[AttemptRecord(attempt=1, agent="a1", outcome="failed", exit_code=1)])
    base.update(kw)
    return Run(**base)  # type: ignore[arg-type]


def test_a_preempted_run_is_queued_again_as_a_new_attempt_due_after_the_grace() -> None:
    run = _running()
    why = "preempted by run acme.urgent.1 (high) to free 16 GPUs on leaf l1"
    new = apply(run, Change(event=RunEvent.PREEMPT, reason=why, delay_seconds=30), NOW)
    assert (new.state, new.attempt, new.agent, new.agents, new.token) == (RunState.SCHEDULED, 3, None, [], 0)
    assert (new.due_at, new.reason, new.preemptions) == (NOW + timedelta(seconds=30), why, 1)
    last = new.history[-1]
    assert (last.attempt, last.outcome, last.reason, last.agent, last.token) == (2, "preempted", why, "a1", 9)
    assert (last.started_at, last.finished_at) == (run.started_at, NOW)


def test_a_preemption_spends_nothing_of_the_retry_budget() -> None:
    # Given a run with one failure of its two attempts behind it, preempted on its second
    new = apply(_running(), Change(event=RunEvent.PREEMPT, reason="preempted"), NOW)
    # Then only the failure counts: its third attempt may still fail once more before it is dead
    assert retry.failures_so_far(new) == 1
    assert "preempted" not in retry.FAILURE_OUTCOMES
    decision = retry.decide(new, "failed", 1, random.Random(0))
    assert decision.action is retry.RetryAction.DEAD and "2/2 attempts failed" in decision.reason
    twice = apply(msgspec.structs.replace(new, state=RunState.RUNNING, started_at=NOW, attempt=3),
                  Change(event=RunEvent.PREEMPT, reason="again"), NOW)
    assert (twice.preemptions, retry.failures_so_far(twice)) == (2, 1)


def test_an_assignment_may_carry_the_preemption_it_took_and_the_start_clears_it() -> None:
    run = _running(state=RunState.SCHEDULED, agent=None, agents=[], token=0, started_at=None)
    why = "preempting run acme.train.1 (low) to free 8 GPUs on a1"
    assigned = apply(run, Change(event=RunEvent.ASSIGN, agents=["a1"], reason=why), NOW)
    assert (assigned.state, assigned.reason) == (RunState.ASSIGNED, why)
    started = apply(assigned, Change(event=RunEvent.START, attempt=2, token=4, agent="a1"), NOW)
    assert started.reason == ""

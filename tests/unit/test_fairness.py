"""FairQueue: priority with ageing, deficit round-robin across tenants, quotas."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jetcron.core.errors import InvalidSpec
from jetcron.core.models import Priority, QueueQuota, Resources, TenantPolicy
from jetcron.core.placing.fairness import FairQueue, validate_queue_quotas
from jetcron.core.placing.placement import Demand

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def demand(run_id: str, tenant: str = "a", priority: Priority = Priority.NORMAL, *, age: float = 0.0,
           cpu: float = 1, mem: int = 1024, gpus: int = 0, hosts: int = 1) -> Demand:
    return Demand(run_id=run_id, tenant=tenant, priority=priority,
                  resources=Resources(cpu=cpu, memory_mb=mem, gpus=gpus, hosts=hosts),
                  enqueued_at=T0 - timedelta(seconds=age))


def serve_all(q: FairQueue, now: datetime = T0) -> list[str]:
    """Place every candidate, as a caller with unlimited room would."""
    order = []
    for d in q.candidates(now):
        q.remove(d.run_id)
        q.charge(d)
        order.append(d.run_id)
    return order


def test_priorities_are_served_in_order() -> None:
    q = FairQueue()
    for p in (Priority.LOW, Priority.NORMAL, Priority.CRITICAL, Priority.HIGH):
        q.push(demand(p.value, priority=p))
    assert serve_all(q) == ["critical", "high", "normal", "low"]


@pytest.mark.parametrize(("age", "level"), [
    pytest.param(0, 3, id="fresh"),
    pytest.param(299.9, 3, id="just_short_of_one_period"),
    pytest.param(300, 2, id="one_period_is_normal"),
    pytest.param(650, 1, id="two_periods_is_high"),
    pytest.param(900, 0, id="three_periods_is_critical"),
    pytest.param(10**6, 0, id="never_above_critical"),
])
def test_ageing_promotes_one_level_per_period(age: float, level: int) -> None:
    q = FairQueue(ageing_seconds=300)
    assert q.level(demand("r", priority=Priority.LOW, age=age), T0) == level


def test_an_aged_low_demand_overtakes_fresh_high_work() -> None:
    # Given a low run has waited three ageing periods and fresh high work keeps arriving
    q = FairQueue(ageing_seconds=300)
    q.push(demand("old-low", priority=Priority.LOW, age=901))
    q.push(demand("fresh-high", priority=Priority.HIGH))
    q.push(demand("fresh-normal", priority=Priority.NORMAL))
    # Then the low run is served first: nothing starves
    assert serve_all(q) == ["old-low", "fresh-high", "fresh-normal"]


def test_within_a_level_aged_demands_merge_by_age() -> None:
    q = FairQueue(ageing_seconds=300)
    q.push(demand("normal-new", priority=Priority.NORMAL, age=10))
    q.push(demand("low-aged", priority=Priority.LOW, age=400))
    q.push(demand("normal-old", priority=Priority.NORMAL, age=200))
    assert serve_all(q) == ["low-aged", "normal-old", "normal-new"]


@pytest.mark.parametrize(("weights", "expected"), [
    pytest.param({}, ["a1", "b1", "a2", "b2", "a3", "b3"], id="equal_weights_alternate"),
    pytest.param({"a": 2.0}, ["a1", "a2", "b1", "a3", "b2", "b3"], id="double_weight_two_per_turn"),
    pytest.param({"b": 0.5}, ["a1", "a2", "b1", "a3", "b2", "b3"], id="half_weight_every_other_round"),
])
def test_round_robin_across_tenants_by_weight(weights: dict[str, float], expected: list[str]) -> None:
    q = FairQueue({t: TenantPolicy(tenant=t, weight=w) for t, w in weights.items()})
    for i in range(1, 4):
        q.push(demand(f"a{i}", "a", age=10 - i))
        q.push(demand(f"b{i}", "b", age=10 - i))
    assert serve_all(q) == expected


def test_tiny_weights_do_not_spin_through_empty_rounds() -> None:
    q = FairQueue({t: TenantPolicy(tenant=t, weight=w) for t, w in (("a", 1e-6), ("b", 3e-6))}, quantum=0.5)
    for i in range(4):
        q.push(demand(f"a{i}", "a", age=4 - i))
        q.push(demand(f"b{i}", "b", age=4 - i))
    # A million empty rounds are skipped in one step, and the 1:3 share holds.
    assert serve_all(q) == ["b0", "b1", "b2", "a0", "b3", "a1", "a2", "a3"]


def test_a_skipped_demand_costs_its_tenant_nothing_and_keeps_its_turn() -> None:
    # Given a's run is skipped (no room) while b is served
    q = FairQueue()
    q.push(demand("a1", "a", age=2))
    q.push(demand("b1", "b", age=1))
    q.push(demand("b2", "b"))
    offered = []
    for d in q.candidates(T0):
        offered.append(d.run_id)
        if d.tenant == "b":
            q.remove(d.run_id)
            q.charge(d)
    assert offered == ["a1", "b1", "b2"]
    # When the next pass comes, a still has the turn
    q.push(demand("b3", "b"))
    assert next(iter(q.candidates(T0))).run_id == "a1"


def test_charges_outside_a_pass_do_not_move_the_round_robin() -> None:
    q = FairQueue()
    for run in ("restored-1", "restored-2", "restored-3"):
        q.charge(demand(run, "a"))  # re-counting runs found running after a restart
    q.push(demand("a1", "a", age=1))
    q.push(demand("b1", "b"))
    assert serve_all(q) == ["a1", "b1"]
    assert q.usage("a") == (4.0, 4096, 0)


def test_every_demand_is_offered_once_per_pass_and_removal_mid_pass_is_safe() -> None:
    q = FairQueue()
    for i in range(5):
        q.push(demand(f"a{i}", "a"))
        q.push(demand(f"b{i}", "b"))
    offered = []
    for d in q.candidates(T0):
        offered.append(d.run_id)
        q.remove("b3")  # cancelled while the pass runs
    assert sorted(offered) == sorted(f"{t}{i}" for t in "ab" for i in range(5) if f"{t}{i}" != "b3")
    assert len(q) == 9 and "b3" not in q


def test_push_of_a_queued_run_keeps_its_place() -> None:
    q = FairQueue()
    q.push(demand("r1", age=5))
    q.push(demand("r2", age=3))
    q.push(demand("r1"))
    assert len(q) == 2
    assert serve_all(q) == ["r1", "r2"]


@pytest.mark.parametrize(("policy", "used", "want", "reason"), [
    pytest.param(TenantPolicy(tenant="a", max_cpu=32), demand("u", cpu=32), demand("r", cpu=4),
                 "quota: tenant a at 32/32 cpu (this run needs 4)", id="cpu_full"),
    pytest.param(TenantPolicy(tenant="a", max_cpu=32), demand("u", cpu=28), demand("r", cpu=4), None,
                 id="cpu_exactly_fits"),
    pytest.param(TenantPolicy(tenant="a", max_memory_mb=4096), demand("u", mem=3072), demand("r", mem=2048),
                 "quota: tenant a at 3072/4096 MB memory (this run needs 2048)", id="memory"),
    pytest.param(TenantPolicy(tenant="a", max_gpus=64), demand("u", gpus=8), demand("r", gpus=8, hosts=8),
                 "quota: tenant a at 8/64 gpus (this run needs 64)", id="gang_counts_every_host"),
    pytest.param(TenantPolicy(tenant="a", max_cpu=2.5), demand("u", cpu=0.5), demand("r", cpu=2.25),
                 "quota: tenant a at 0.5/2.5 cpu (this run needs 2.25)", id="fractional_cpu"),
    pytest.param(TenantPolicy(tenant="b", max_cpu=1), demand("u", cpu=8), demand("r", cpu=8), None,
                 id="other_tenants_quota"),
])
def test_quota_block(policy: TenantPolicy, used: Demand, want: Demand, reason: str | None) -> None:
    q = FairQueue({policy.tenant: policy})
    q.charge(used)
    assert q.quota_block(want) == reason


def test_charge_counts_a_run_once_and_refund_gives_it_back() -> None:
    q = FairQueue({"a": TenantPolicy(tenant="a", max_cpu=4)})
    d = demand("r", cpu=4)
    q.charge(d)
    q.charge(d)
    assert q.usage("a") == (4.0, 1024, 0)
    assert q.quota_block(demand("r2", cpu=1)) == "quota: tenant a at 4/4 cpu (this run needs 1)"
    q.refund(d)
    q.refund(d)
    assert q.usage("a") == (0.0, 0, 0)
    assert q.quota_block(demand("r2", cpu=1)) is None


@pytest.mark.parametrize(("kwargs", "match"), [
    pytest.param({"quantum": 0.0}, "quantum: must be a positive number", id="zero_quantum"),
    pytest.param({"ageing_seconds": float("nan")}, "ageing_seconds: must be a positive number",
                 id="nan_ageing"),
    pytest.param({"policies": {"a": TenantPolicy(tenant="a", weight=-1)}},
                 "weight: tenant a: must be a positive", id="negative_weight"),
])
def test_bad_settings_are_refused(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(InvalidSpec, match=match):
        FairQueue(**kwargs)  # type: ignore[arg-type]


# --- properties ------------------------------------------------------------------------------

def simulate(
    q: FairQueue, backlog: dict[str, int], slots: int, steps: int, seed: int, stop_when_full: bool = True,
) -> dict[str, int]:
    """A cluster with `slots` places; each step one random run finishes and a pass fills the room.

    A caller may end the pass once the cluster is full, or go on trying (and skipping) the rest.
    """
    rng = random.Random(seed)
    n = 0
    for tenant, count in backlog.items():
        for _ in range(count):
            n += 1
            q.push(demand(f"{tenant}-{n}", tenant, age=-n / 1000))
    running: list[Demand] = []
    placed = dict.fromkeys(backlog, 0)
    for _ in range(steps):
        if running:
            q.refund(running.pop(rng.randrange(len(running))))
        if not all(q.waiting(t) for t in backlog):
            break  # fairness is only promised while every tenant has work
        for d in q.candidates(T0):
            if len(running) == slots and stop_when_full:
                break
            if len(running) < slots and q.quota_block(d) is None:
                q.remove(d.run_id)
                q.charge(d)
                running.append(d)
                placed[d.tenant] += 1
    return placed


# Heavy by design: with stop=False every pass walks the whole 2,200-run backlog, 300 passes per example (17 s
# alone on a quiet core; past the 120 s default guard with six workers on two slow cores).
@pytest.mark.timeout(300)
@settings(max_examples=30, deadline=None)
@given(slots=st.integers(1, 20), seed=st.integers(0, 2**16), heavy_first=st.booleans(), stop=st.booleans())
def test_equal_tenants_share_placements_when_one_submits_ten_times_more(
    slots: int, seed: int, heavy_first: bool, stop: bool,
) -> None:
    backlog = {"heavy": 2000, "light": 200} if heavy_first else {"light": 200, "heavy": 2000}
    placed = simulate(FairQueue(), backlog, slots, steps=300, seed=seed, stop_when_full=stop)
    total = placed["heavy"] + placed["light"]
    assert total >= 100
    assert abs(placed["light"] - total / 2) <= 0.1 * total / 2, placed


@settings(max_examples=20, deadline=None)
@given(slots=st.integers(1, 12), seed=st.integers(0, 2**16), weight=st.sampled_from([2.0, 3.0]),
       stop=st.booleans())
def test_weighted_tenants_share_in_proportion(slots: int, seed: int, weight: float, stop: bool) -> None:
    q = FairQueue({"big": TenantPolicy(tenant="big", weight=weight)})
    placed = simulate(q, {"big": 600, "small": 600}, slots, steps=300, seed=seed, stop_when_full=stop)
    assert abs(placed["big"] / placed["small"] - weight) <= 0.1 * weight, placed


def test_a_tenant_blocked_by_quota_does_not_slow_the_others() -> None:
    # Given tenant a is at its cpu quota and b is not limited
    q = FairQueue({"a": TenantPolicy(tenant="a", max_cpu=1)})
    q.charge(demand("a-running", "a"))
    placed = simulate(q, {"a": 50, "b": 50}, slots=4, steps=30, seed=1, stop_when_full=False)
    # Then b takes the 4 places and every one freed after, while a waits
    assert placed == {"a": 0, "b": 4 + 29}
    # When a's running work finishes, a is first in line: waiting cost it nothing
    q.refund(demand("a-running", "a"))
    assert next(iter(q.candidates(T0))).tenant == "a"


@settings(max_examples=60, deadline=None)
@given(
    limits=st.tuples(st.sampled_from([None, 2.0, 5.5, 16.0]), st.sampled_from([None, 4096, 10000]),
                     st.sampled_from([None, 0, 4, 16])),
    work=st.lists(st.tuples(st.sampled_from(["a", "b"]), st.sampled_from([0.5, 1, 2.5, 4]),
                            st.sampled_from([256, 1024, 4096]), st.sampled_from([0, 1, 4]),
                            st.sampled_from([1, 2])),
                  min_size=1, max_size=40),
    finish=st.lists(st.integers(0, 39), max_size=20),
)
def test_quotas_are_never_exceeded(
    limits: tuple[float | None, int | None, int | None], work: list[tuple[str, float, int, int, int]],
    finish: list[int],
) -> None:
    max_cpu, max_mem, max_gpus = limits
    q = FairQueue({"a": TenantPolicy(tenant="a", max_cpu=max_cpu, max_memory_mb=max_mem, max_gpus=max_gpus)})
    for i, (tenant, cpu, mem, gpus, hosts) in enumerate(work):
        q.push(demand(f"r{i}", tenant, cpu=cpu, mem=mem, gpus=gpus, hosts=hosts))
    running: list[Demand] = []
    for f in [*finish, -1]:
        for d in q.candidates(T0):
            if q.quota_block(d) is None:
                q.remove(d.run_id)
                q.charge(d)
                running.append(d)
            cpu, mem, gpus = q.usage("a")
            assert max_cpu is None or cpu <= max_cpu + 1e-9
            assert max_mem is None or mem <= max_mem
            assert max_gpus is None or gpus <= max_gpus
        if running and f >= 0:
            q.refund(running.pop(f % len(running)))


def _queued(run_id: str, queue: str, tenant: str = "a", age: float = 0.0) -> Demand:
    return msgspec.structs.replace(demand(run_id, tenant, age=age), queue=queue)


def test_a_tenants_queues_take_turns_inside_its_share() -> None:
    q = FairQueue()
    for i in range(4):  # the etl backlog is older, yet adhoc is not starved behind it
        q.push(_queued(f"etl-{i}", "etl", age=100 - i))
    for i in range(2):
        q.push(_queued(f"adhoc-{i}", "adhoc", age=10 - i))
    q.push(_queued("b-0", "etl", tenant="b", age=50))
    assert serve_all(q) == ["etl-0", "b-0", "adhoc-0", "etl-1", "adhoc-1", "etl-2", "etl-3"]


def test_the_queue_served_last_waits_its_turn_across_passes() -> None:
    q = FairQueue()
    for i in range(3):
        q.push(_queued(f"etl-{i}", "etl", age=100 - i))
        q.push(_queued(f"adhoc-{i}", "adhoc", age=10 - i))
    placed = []
    for _ in range(6):  # one placement per pass, as when one slot frees at a time
        candidates = q.candidates(T0)
        first = next(candidates)
        q.remove(first.run_id)
        q.charge(first)  # inside the pass, as placement charges
        candidates.close()
        placed.append(first.run_id)
    assert placed == ["etl-0", "adhoc-0", "etl-1", "adhoc-1", "etl-2", "adhoc-2"]


# --- quotas per named queue ------------------------------------------------------------------

ACME = TenantPolicy(tenant="acme", max_cpu=10, queues={
    "batch": QueueQuota(max_cpu=8, max_memory_mb=16384, max_gpus=2), "adhoc": QueueQuota(max_gpus=0)})


def _in(queue: str, run_id: str, *, tenant: str = "acme", cpu: float = 1, mem: int = 1024, gpus: int = 0) -> Demand:
    return msgspec.structs.replace(demand(run_id, tenant, cpu=cpu, mem=mem, gpus=gpus), queue=queue)


@pytest.mark.parametrize(("running", "want", "reason"), [
    pytest.param([_in("batch", "u", cpu=8)], _in("batch", "r"),
                 "quota: queue acme/batch at 8/8 cpu (this run needs 1)", id="queue_at_its_cpu_quota"),
    pytest.param([_in("batch", "u", cpu=8)], _in("etl", "r"), None, id="another_queue_still_places"),
    pytest.param([_in("batch", "u", cpu=8)], _in("batch", "r", tenant="globex"), None,
                 id="another_tenants_queue_of_that_name"),
    pytest.param([_in("batch", "u", cpu=7)], _in("batch", "r"), None, id="queue_exactly_fits"),
    pytest.param([_in("batch", "u", mem=16000)], _in("batch", "r", mem=512),
                 "quota: queue acme/batch at 16000/16384 MB memory (this run needs 512)", id="queue_memory"),
    pytest.param([_in("batch", "u", gpus=2)], _in("batch", "r", gpus=1),
                 "quota: queue acme/batch at 2/2 gpus (this run needs 1)", id="queue_gpus"),
    pytest.param([], _in("adhoc", "r", gpus=1), "quota: queue acme/adhoc at 0/0 gpus (this run needs 1)",
                 id="a_zero_quota_shuts_the_queue_to_that_resource"),
    pytest.param([], _in("adhoc", "r", cpu=4), None, id="a_queue_quota_limits_only_what_it_names"),
    pytest.param([_in("batch", "u", cpu=6), _in("etl", "v", cpu=3)], _in("etl", "r", cpu=2),
                 "quota: tenant acme at 9/10 cpu (this run needs 2)", id="the_tenants_quota_caps_the_sum"),
    pytest.param([_in("batch", "u", cpu=6), _in("etl", "v", cpu=3)], _in("batch", "r", cpu=2),
                 "quota: tenant acme at 9/10 cpu (this run needs 2)", id="the_tenants_quota_holds_inside_a_queue"),
    pytest.param([_in("batch", "u", cpu=8), _in("etl", "v", cpu=2)], _in("batch", "r"),
                 "quota: queue acme/batch at 8/8 cpu (this run needs 1)", id="both_full_names_the_queue"),
])
def test_queue_quota_block(running: list[Demand], want: Demand, reason: str | None) -> None:
    q = FairQueue({"acme": ACME, "globex": TenantPolicy(tenant="globex")})
    for d in running:
        q.charge(d)
    assert q.quota_block(want) == reason


def test_refund_frees_the_queues_share_and_the_tenants() -> None:
    # Given batch at its 8 cpu
    q = FairQueue({"acme": ACME})
    held = [_in("batch", f"u{i}", cpu=4) for i in range(2)]
    for d in (*held, held[0]):  # charging a run twice counts it once
        q.charge(d)
    assert (q.queue_usage("acme", "batch"), q.usage("acme")) == ((8.0, 2048, 0), (8.0, 2048, 0))
    assert q.quota_block(_in("batch", "r")) == "quota: queue acme/batch at 8/8 cpu (this run needs 1)"
    # When one of its runs ends (refunded twice: counted back once)
    q.refund(held[0])
    q.refund(held[0])
    # Then the queue has room again, and so has the tenant
    assert (q.queue_usage("acme", "batch"), q.usage("acme")) == ((4.0, 1024, 0), (4.0, 1024, 0))
    assert q.quota_block(_in("batch", "r", cpu=4)) is None
    q.refund(held[1])
    assert (q.queue_usage("acme", "batch"), q.usage("acme")) == ((0.0, 0, 0), (0.0, 0, 0))


def test_a_queue_at_its_quota_waits_while_the_tenants_other_queue_is_served() -> None:
    # Given batch at its quota, and a backlog in batch older than the one in etl
    q = FairQueue({"acme": TenantPolicy(tenant="acme", queues={"batch": QueueQuota(max_cpu=1)})})
    q.charge(_in("batch", "running"))
    for i in range(3):
        q.push(msgspec.structs.replace(_in("batch", f"batch-{i}"), enqueued_at=T0 - timedelta(seconds=100 - i)))
        q.push(msgspec.structs.replace(_in("etl", f"etl-{i}"), enqueued_at=T0 - timedelta(seconds=10 - i)))
    # When placement passes with room for everything
    placed = []
    for d in q.candidates(T0):
        if q.quota_block(d) is None:
            q.remove(d.run_id)
            q.charge(d)
            placed.append(d.run_id)
    # Then etl's runs all go, batch's wait
    assert placed == ["etl-0", "etl-1", "etl-2"]
    assert len(q) == 3


@pytest.mark.parametrize(("queues", "match"), [
    pytest.param({"bad name": QueueQuota(max_cpu=1)}, r"queues: a queue name must be .* \(got 'bad name'\)",
                 id="queue_name"),
    pytest.param({"batch": QueueQuota(max_cpu=-1)}, r"queues\.batch\.max_cpu: must be a number >= 0 .*\(got -1\)",
                 id="negative_cpu"),
    pytest.param({"batch": QueueQuota(max_cpu=float("inf"))}, r"queues\.batch\.max_cpu: .*\(got inf\)",
                 id="infinite_cpu"),
    pytest.param({"batch": QueueQuota(max_cpu=float("nan"))}, r"queues\.batch\.max_cpu: .*\(got nan\)",
                 id="nan_cpu"),
    pytest.param({"batch": QueueQuota(max_memory_mb=-5)}, r"queues\.batch\.max_memory_mb: .*\(got -5\)",
                 id="negative_memory"),
    pytest.param({"ok": QueueQuota(), "gpu": QueueQuota(max_gpus=10**10)},
                 r"queues\.gpu\.max_gpus: .*<= 1000000000 \(got 10000000000\)", id="absurd_gpus"),
])
def test_bad_queue_quotas_are_refused_naming_the_field_and_value(queues: dict[str, QueueQuota], match: str) -> None:
    with pytest.raises(InvalidSpec, match=match):
        validate_queue_quotas(queues)


def test_good_queue_quotas_pass() -> None:
    validate_queue_quotas({"batch": QueueQuota(max_cpu=0.5, max_memory_mb=0, max_gpus=2), "etl": QueueQuota()})


# --- the order the placement integration test checks, one placement per pass -----------------

def test_one_slot_serves_priority_then_weights_then_queues_in_turn() -> None:
    """What tests/integration/test_placement_fairness.py expects of the running services, in the pure model: one
    agent slot frees at a time, and each pass tries every candidate (placing the first, skipping the rest)."""
    q = FairQueue({"a": TenantPolicy(tenant="a", weight=2), "b": TenantPolicy(tenant="b", weight=1)})
    low = [demand("low", "a", Priority.LOW)]
    normal_a = [_queued(f"{queue}-{i}", queue, "a") for queue in ("x", "y") for i in range(3)]
    normal_b = [demand(f"b-{i}", "b") for i in range(6)]
    critical = [demand("critical", "b", Priority.CRITICAL)]
    for d in (*low, *normal_a, *normal_b, *critical):  # queued in the order FIFO would get wrong
        q.push(d)
    placed = []
    while len(q):
        for _ in range(2):  # passes with no room (the slot is taken) try everyone and charge nobody
            for _ in q.candidates(T0):
                pass
        first = None
        for d in q.candidates(T0):
            if first is None:
                first = d
                q.remove(d.run_id)
                q.charge(d)
        assert first is not None
        placed.append(first.run_id)
    assert placed == ["critical", "x-0", "y-0", "b-0", "x-1", "y-1", "b-1", "x-2", "y-2", "b-2", "b-3", "b-4", "b-5",
                      "low"]

"""Placement: best fit through the index, constraints, reasons, GPU gangs, and never over-committing."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jetcron.core.errors import InvalidSpec, NotFound
from jetcron.core.models import AgentInfo, Priority, Resources
from jetcron.core.placing.agents_index import Used
from jetcron.core.placing.placement import Cluster, Demand, Placement, Unplaced

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def agent(agent_id: str, cpu: float = 8, mem: int = 16384, gpus: int = 0, *, model: str | None = None,
          leaf: str | None = None, zone: str | None = None, caps: list[str] | None = None,
          draining: bool = False, indices: list[int] | None = None, slots: int | None = None) -> AgentInfo:
    labels = {k: v for k, v in (("leaf", leaf), ("zone", zone)) if v is not None}
    return AgentInfo(agent_id=agent_id, cpu=cpu, memory_mb=mem, gpus=gpus, gpu_model=model, labels=labels,
                     capabilities=caps or [], draining=draining, gpu_indices=indices or [], slots=slots,
                     heartbeat_at=T0, started_at=T0)


def demand(run_id: str = "r1", cpu: float = 1, mem: int = 1024, gpus: int = 0, *, hosts: int = 1,
           model: str | None = None, require: dict[str, str] | None = None,
           needs: list[str] | None = None) -> Demand:
    return Demand(run_id=run_id, tenant="a", priority=Priority.NORMAL,
                  resources=Resources(cpu=cpu, memory_mb=mem, gpus=gpus, gpu_model=model, hosts=hosts),
                  require=require or {}, needs=needs or [], enqueued_at=T0)


def cluster(*agents: AgentInfo, strategy: str = "pack") -> Cluster:
    c = Cluster(strategy)  # type: ignore[arg-type]
    for a in agents:
        c.upsert_agent(a)
    return c


def placed_on(result: Placement | Unplaced) -> list[str]:
    assert isinstance(result, Placement), result
    return result.agents


@pytest.mark.parametrize(("agents", "want", "expected"), [
    pytest.param([agent("big", cpu=16), agent("small", cpu=2)], demand(cpu=2), "small", id="tightest_cpu"),
    pytest.param([agent("gpu", cpu=4, gpus=8), agent("cpu", cpu=16)], demand(cpu=2), "cpu",
                 id="cpu_work_keeps_off_gpu_hosts"),
    pytest.param([agent("x", cpu=4, mem=1000), agent("y", cpu=8, mem=4096)], demand(cpu=2, mem=2048), "y",
                 id="memory_rules_out_tighter_cpu"),
    pytest.param([agent("a", mem=8192), agent("b", mem=4096)], demand(mem=1024), "b",
                 id="memory_breaks_cpu_tie"),
    pytest.param([agent("g8", gpus=8), agent("g2", gpus=2)], demand(gpus=2), "g2", id="tightest_gpus"),
    pytest.param([agent("eu", zone="eu"), agent("us", cpu=2, zone="us")], demand(require={"zone": "eu"}),
                 "eu",
                 id="label_constraint"),
    pytest.param([agent("plain", cpu=2), agent("dock", caps=["docker"])], demand(needs=["docker"]), "dock",
                 id="capability"),
    pytest.param([agent("a100", gpus=1, model="A100"), agent("h100", gpus=8, model="H100")],
                 demand(gpus=1, model="H100"), "h100", id="gpu_model"),
    pytest.param([agent("drain", cpu=2, draining=True), agent("open")], demand(), "open",
                 id="draining_skipped"),
])
def test_pack_picks_the_tightest_feasible_agent(agents: list[AgentInfo], want: Demand, expected: str) -> None:
    assert placed_on(cluster(*agents).place(want)) == [expected]


@pytest.mark.parametrize(("agents", "want", "expected"), [
    pytest.param([agent("big", cpu=16), agent("small", cpu=2)], demand(cpu=2), "big", id="most_free_cpu"),
    pytest.param([agent("g8", gpus=8), agent("g2", gpus=2)], demand(gpus=2), "g8", id="most_free_gpus"),
    pytest.param([agent("gpu", cpu=32, gpus=8), agent("cpu", cpu=16)], demand(cpu=2), "cpu",
                 id="cpu_work_still_keeps_off_gpu_hosts"),
])
def test_spread_picks_the_most_free_agent(agents: list[AgentInfo], want: Demand, expected: str) -> None:
    assert placed_on(cluster(*agents, strategy="spread").place(want)) == [expected]


def test_spread_fills_agents_evenly() -> None:
    c = cluster(agent("a"), agent("b"), strategy="spread")
    hosts = [placed_on(c.place(demand(f"r{i}", cpu=1)))[0] for i in range(4)]
    assert sorted(hosts) == ["a", "a", "b", "b"]


def test_suspect_agent_gets_cpu_work_but_no_gpu_work_until_cleared() -> None:
    # Given the only GPU host has missed heartbeats
    c = cluster(agent("g", gpus=2))
    c.mark_suspect("g")
    # Then GPU work waits with a reason, cpu work still lands
    result = c.place(demand("gpu", gpus=1))
    assert isinstance(result, Unplaced) and not result.unsatisfiable
    assert result.reason.endswith("(every matching agent is draining or suspect)")
    assert placed_on(c.place(demand("cpu"))) == ["g"]
    # When the health check clears it, GPU work lands
    c.clear_suspect("g")
    assert placed_on(c.place(demand("gpu", gpus=1))) == ["g"]


def test_gpu_indices_come_from_the_agent_and_never_overlap() -> None:
    c = cluster(agent("g", gpus=4, indices=[3, 5, 6, 7]))
    first, second = c.place(demand("r1", gpus=2)), c.place(demand("r2", gpus=2))
    assert isinstance(first, Placement) and isinstance(second, Placement)
    assert first.gpu_indices == {"g": [3, 5]} and second.gpu_indices == {"g": [6, 7]}
    c.release("r1")
    assert c.free("g")[2] == [3, 5]


@pytest.mark.parametrize(("agents", "want", "reason", "never"), [
    pytest.param([agent("agent-7", cpu=2), agent("agent-2", cpu=8, draining=True)], demand(cpu=4, mem=2048),
                 "no agent with 4.0 free cpu and 2048 MB free memory "
                 "(largest free: agent-7 with 2.0 cpu and 16384 MB)",
                 False, id="busy_now"),
    pytest.param([agent("agent-3", cpu=16), agent("agent-1", cpu=4)], demand(cpu=64),
                 "no registered agent can ever fit 64 cpu (largest: agent-3 with 16 cpu)", True,
                 id="too_much_cpu"),
    pytest.param([agent("a", mem=4096)], demand(mem=8192),
                 "no registered agent can ever fit 8192 MB memory (largest: a with 4096 MB)", True,
                 id="too_much_memory"),
    pytest.param([agent("a", gpus=4)], demand(gpus=8),
                 "no registered agent can ever fit 8 GPUs (largest: a with 4 GPUs)", True,
                 id="too_many_gpus"),
    pytest.param([agent("a", gpus=8, model="A100")], demand(gpus=1, model="H100"),
                 "no registered agent matches gpu model H100", True, id="no_such_gpu_model"),
    pytest.param([agent("a", zone="us")], demand(require={"zone": "eu"}),
                 "no registered agent matches zone=eu", True, id="no_such_label"),
    pytest.param([agent("cpu", cpu=16, mem=1024), agent("mem", cpu=2, mem=65536)], demand(cpu=8, mem=8192),
                 "no registered agent can ever fit 8 cpu, 8192 MB memory and 0 GPUs on one host "
                 "(largest: cpu with 16 cpu, 1024 MB and 0 GPUs)", True, id="no_single_host_has_both"),
    pytest.param([agent("a", draining=True)], demand(),
                 "no agent with 1.0 free cpu and 1024 MB free memory (every matching agent is draining)",
                 False,
                 id="only_draining"),
    pytest.param([agent("a", gpus=2, zone="eu")], demand(cpu=0.25, gpus=4, require={"zone": "eu"}),
                 "no registered agent matching zone=eu can ever fit 4 GPUs (largest: a with 2 GPUs)", True,
                 id="constrained_gpus"),
    pytest.param([], demand(), "no agent with 1.0 free cpu and 1024 MB free memory (no agents registered)",
                 False,
                 id="empty_cluster_is_not_unsatisfiable"),
])
def test_unplaced_reasons(agents: list[AgentInfo], want: Demand, reason: str, never: bool) -> None:
    result = cluster(*agents).place(want)
    assert result == Unplaced(run_id=want.run_id, reason=reason, unsatisfiable=never)


def test_busy_gpu_reason_names_the_agent_with_most_free_gpus() -> None:
    c = cluster(agent("g1", gpus=4), agent("g2", gpus=8))
    c.place(demand("hog", gpus=7))
    c.place(demand("small", gpus=4))
    result = c.place(demand("r", gpus=2))
    assert isinstance(result, Unplaced)
    assert result.reason == ("no agent with 1.0 free cpu, 1024 MB free memory and 2 free GPUs "
                             "(largest free: g2 with 1 GPU, 7.0 cpu and 15360 MB)")


def test_never_over_commits_and_release_restores_exactly() -> None:
    c = cluster(agent("a", cpu=1, mem=1000))
    for i in range(10):
        assert placed_on(c.place(demand(f"r{i}", cpu=0.1, mem=100))) == ["a"]
    assert isinstance(c.place(demand("extra", cpu=0.1, mem=100)), Unplaced)
    for i in range(10):
        c.release(f"r{i}")
    # Millicores keep ten 0.1 releases exact: a full 1.0 demand fits again.
    assert c.free("a") == (1.0, 1000, [])
    assert placed_on(c.place(demand("full", cpu=1, mem=1000))) == ["a"]


def test_place_is_idempotent_and_release_of_unknown_run_is_a_no_op() -> None:
    c = cluster(agent("a", cpu=2))
    first = c.place(demand("r", cpu=2))
    assert c.place(demand("r", cpu=2)) == first
    c.release("never-placed")
    c.release("r")
    c.release("r")
    assert c.free("a") == (2.0, 16384, [])


def test_upsert_keeps_reservations_and_a_shrink_does_not_over_commit() -> None:
    c = cluster(agent("a", cpu=8, gpus=4))
    c.place(demand("r", cpu=6, gpus=2))
    c.upsert_agent(agent("a", cpu=8, gpus=4))  # heartbeat
    assert c.free("a") == (2.0, 15360, [2, 3])
    c.upsert_agent(agent("a", cpu=4, gpus=4))  # capacity shrank under a running job
    assert c.free("a")[0] == 0.0
    assert isinstance(c.place(demand("r2", cpu=0.1)), Unplaced)
    c.release("r")
    assert c.free("a") == (4.0, 16384, [0, 1, 2, 3])


def test_a_heartbeat_that_only_starts_or_stops_draining_keeps_the_books() -> None:
    c = cluster(agent("a", cpu=8, gpus=4))
    c.place(demand("r", cpu=6, gpus=2))
    c.upsert_agent(agent("a", cpu=8, gpus=4, draining=True))
    assert isinstance(c.place(demand("r2", cpu=1)), Unplaced)  # draining: takes nothing new
    assert c.free("a") == (2.0, 15360, [2, 3])
    c.upsert_agent(agent("a", cpu=8, gpus=4))
    assert placed_on(c.place(demand("r2", cpu=1, gpus=1))) == ["a"]
    assert c.free("a") == (1.0, 14336, [3])


def test_remove_agent_returns_its_runs_and_forgets_it() -> None:
    c = cluster(agent("a"), agent("b", cpu=2))
    c.place(demand("r1", cpu=2))
    assert c.remove_agent("b") == ["r1"]
    assert c.remove_agent("b") == []
    with pytest.raises(NotFound, match="agent 'b' not found"):
        c.free("b")
    c.release("r1")
    # A re-registered agent starts clean: its old share died with it.
    c.upsert_agent(agent("b", cpu=2))
    assert c.free("b") == (2.0, 16384, [])


def test_unknown_strategy_is_refused() -> None:
    with pytest.raises(InvalidSpec, match="strategy: must be 'pack' or 'spread'"):
        Cluster("random")  # type: ignore[arg-type]


@pytest.mark.parametrize(("res", "match"), [
    pytest.param(Resources(cpu=-1), r"resources.cpu: must be a finite number >= 0 \(got -1\)",
                 id="negative_cpu"),
    pytest.param(Resources(cpu=float("nan")), r"resources.cpu: must be a finite number", id="nan_cpu"),
    pytest.param(Resources(memory_mb=-5), r"resources.memory_mb: must be >= 0 \(got -5\)",
                 id="negative_memory"),
    pytest.param(Resources(gpus=-1), r"resources.gpus: must be >= 0", id="negative_gpus"),
    pytest.param(Resources(hosts=0), r"resources.hosts: must be >= 1 \(got 0\)", id="zero_hosts"),
])
def test_amounts_that_would_corrupt_the_books_are_refused(res: Resources, match: str) -> None:
    c = cluster(agent("a"))
    bad = Demand(run_id="r", tenant="a", priority=Priority.LOW, resources=res, enqueued_at=T0)
    with pytest.raises(InvalidSpec, match=match):
        c.place(bad)
    assert c.free("a") == (8.0, 16384, [])


def test_small_label_pool_and_index_paths_agree() -> None:
    # leaf selects 2 agents (scanned directly); zone selects 300 (searched through the index).
    agents = [agent(f"z{i:03}", cpu=4 + i % 7, zone="eu", leaf=f"leaf-{i // 150}") for i in range(300)]
    c = cluster(*agents)
    by_leaf = placed_on(c.place(demand("r1", cpu=5, require={"leaf": "leaf-1", "zone": "eu"})))
    by_zone = placed_on(c.place(demand("r2", cpu=5, require={"zone": "eu"})))
    assert c.free(by_leaf[0])[0] == 0.0 and c.free(by_zone[0])[0] == 0.0


# --- GPU gangs -------------------------------------------------------------------------------

def leaf_cluster(sizes: dict[str, int], gpus: int = 8) -> Cluster:
    hosts = (agent(f"{leaf}-h{h}", gpus=gpus, leaf=leaf) for leaf, n in sizes.items() for h in range(n))
    return cluster(*hosts)


def test_gang_lands_on_one_leaf_with_every_gpu_of_each_host() -> None:
    c = leaf_cluster({"leaf-1": 4, "leaf-2": 9})
    result = c.place(demand("gang", gpus=8, hosts=8))
    assert isinstance(result, Placement)
    assert len(set(result.agents)) == 8 and all(a.startswith("leaf-2-") for a in result.agents)
    assert all(ids == list(range(8)) for ids in result.gpu_indices.values())


def test_gang_pack_prefers_the_tightest_leaf() -> None:
    c = leaf_cluster({"leaf-1": 9, "leaf-2": 4})
    assert {a.split("-h")[0] for a in placed_on(c.place(demand("g", gpus=8, hosts=4)))} == {"leaf-2"}


def test_gang_waits_naming_the_closest_leaf() -> None:
    c = leaf_cluster({"leaf-1": 8, "leaf-2": 2, "leaf-3": 8})
    c.place(demand("busy1", gpus=1, require={"leaf": "leaf-1"}))
    c.place(demand("busy3a", gpus=8, require={"leaf": "leaf-3"}))
    c.place(demand("busy3b", gpus=8, require={"leaf": "leaf-3"}))
    before = {f"leaf-{n}-h{h}": c.free(f"leaf-{n}-h{h}") for n, k in ((1, 8), (3, 8)) for h in range(k)}
    result = c.place(demand("gang", gpus=8, hosts=8))
    assert result == Unplaced(run_id="gang", unsatisfiable=False,
                              reason="no leaf with 8 hosts × 8 free GPUs (closest: leaf-1 with 7)")
    # All or nothing: a failed gang reserved nothing.
    assert before == {a: c.free(a) for a in before}


def test_gang_that_no_leaf_could_ever_hold_is_unsatisfiable() -> None:
    c = leaf_cluster({"leaf-1": 4, "leaf-3": 6})
    result = c.place(demand("gang", gpus=8, hosts=8))
    assert result == Unplaced(run_id="gang", unsatisfiable=True,
                              reason="no leaf can ever hold 8 hosts × 8 GPUs (largest: leaf-3 with 6)")


def test_gang_is_never_split_across_leaves_even_when_the_total_fits() -> None:
    c = leaf_cluster({"leaf-1": 4, "leaf-2": 4})
    assert isinstance(c.place(demand("gang", gpus=8, hosts=8)), Unplaced)


def test_gang_member_loss_returns_the_gang_and_release_frees_every_member() -> None:
    c = leaf_cluster({"leaf-1": 3})
    gang = placed_on(c.place(demand("gang", gpus=4, hosts=3)))
    assert c.remove_agent(gang[0]) == ["gang"]
    c.release("gang")
    assert all(c.free(a) == (8.0, 16384, list(range(8))) for a in gang[1:])


def test_cpu_gang_without_gpus_also_stays_on_one_leaf() -> None:
    c = leaf_cluster({"leaf-1": 2, "leaf-2": 3}, gpus=0)
    hosts = placed_on(c.place(demand("g", cpu=8, hosts=3)))
    assert {h.split("-h")[0] for h in hosts} == {"leaf-2"}


# --- properties ------------------------------------------------------------------------------

agent_specs = st.lists(
    st.tuples(st.sampled_from([1, 2, 4, 8]), st.sampled_from([1024, 4096]), st.sampled_from([0, 0, 2, 8]),
              st.sampled_from(["leaf-a", "leaf-b", "leaf-c"]), st.booleans(), st.booleans(),
              st.sampled_from([None, None, 1, 2, 3])),
    min_size=1, max_size=12,
)
ops = st.lists(
    st.one_of(
        st.tuples(st.just("place"), st.sampled_from([0.5, 1, 2, 3, 8]), st.sampled_from([256, 1024, 3000]),
                  st.sampled_from([0, 0, 1, 2, 8]), st.sampled_from([1, 1, 1, 2, 3]),
                  st.sampled_from([None, "leaf-a"])),
        st.tuples(st.just("release"), st.integers(0, 40)),
        st.tuples(st.just("suspect"), st.integers(0, 11), st.booleans()),
        st.tuples(st.just("drain"), st.integers(0, 11), st.booleans()),
    ),
    max_size=60,
)


@settings(max_examples=150, deadline=None)
@given(specs=agent_specs, steps=ops, spread=st.booleans())
def test_random_sequences_never_over_commit_and_pick_a_best_fit(
    specs: list[tuple[int, int, int, str, bool, bool, int | None]], steps: list[tuple[Any, ...]], spread: bool,
) -> None:
    infos = {f"a{i}": agent(f"a{i}", cpu=c, mem=m, gpus=g, leaf=leaf, caps=["docker"] if dock else [], slots=slots)
             for i, (c, m, g, leaf, dock, _, slots) in enumerate(specs)}
    c = cluster(*infos.values(), strategy="spread" if spread else "pack")
    drained = {f"a{i}" for i, s in enumerate(specs) if s[5]}
    for agent_id in drained:
        infos[agent_id] = agent(agent_id, cpu=infos[agent_id].cpu, mem=infos[agent_id].memory_mb,
                                gpus=infos[agent_id].gpus, leaf=infos[agent_id].labels["leaf"], draining=True,
                                slots=infos[agent_id].slots)
        c.upsert_agent(infos[agent_id])
    suspect: set[str] = set()
    held: dict[str, Demand] = {}
    for n, step in enumerate(steps):
        if step[0] == "place":
            _, cpu, mem, gpus, hosts, leaf = step
            d = demand(f"r{n}", cpu=float(cpu), mem=int(mem), gpus=int(gpus), hosts=int(hosts),
                       require={"leaf": leaf} if leaf else None)
            before = {a: c.free(a) for a in infos}
            taken = attempts_on(c, held)
            result = c.place(d)
            if isinstance(result, Placement):
                held[d.run_id] = d
                check_placement(d, result, infos, suspect, before, spread, taken)
            else:
                assert before == {a: c.free(a) for a in infos}, "an unplaced demand reserved something"
                ok = feasible(d, infos, suspect, before, taken)
                if d.resources.hosts == 1:
                    assert not ok, f"missed a feasible agent: {result.reason}"
                else:
                    leaves = ("leaf-a", "leaf-b", "leaf-c")
                    per_leaf = [sum(infos[a].labels["leaf"] == leaf for a in ok) for leaf in leaves]
                    assert max(per_leaf) < d.resources.hosts, f"missed a feasible leaf: {result.reason}"
        elif step[0] == "release" and held:
            run_id = sorted(held)[int(step[1]) % len(held)]
            c.release(run_id)
            del held[run_id]
        elif step[0] == "suspect":
            agent_id = f"a{int(step[1]) % len(infos)}"
            (c.mark_suspect if step[2] else c.clear_suspect)(agent_id)
            (suspect.add if step[2] else suspect.discard)(agent_id)
        assert_books_balance(c, infos, held)


def attempts_on(c: Cluster, held: dict[str, Demand]) -> dict[str, int]:
    """How many held runs have a share on each agent (each takes one of its slots)."""
    taken: dict[str, int] = {}
    for run_id in held:
        p = c.reservation(run_id)
        assert p is not None
        for a in p.agents:
            taken[a] = taken.get(a, 0) + 1
    return taken


def feasible(d: Demand, infos: dict[str, AgentInfo], suspect: set[str],
             free: dict[str, tuple[float, int, list[int]]], taken: dict[str, int]) -> list[str]:
    res = d.resources
    return [a for a, info in infos.items()
            if not info.draining and not (res.gpus and a in suspect)
            and (info.slots is None or taken.get(a, 0) < info.slots)
            and all(info.labels.get(k) == v for k, v in d.require.items())
            and free[a][0] >= res.cpu - 1e-9 and free[a][1] >= res.memory_mb and len(free[a][2]) >= res.gpus]


def check_placement(d: Demand, p: Placement, infos: dict[str, AgentInfo], suspect: set[str],
                    before: dict[str, tuple[float, int, list[int]]], spread: bool, taken: dict[str, int]) -> None:
    res = d.resources
    ok = feasible(d, infos, suspect, before, taken)
    assert len(p.agents) == len(set(p.agents)) == res.hosts
    assert set(p.agents) <= set(ok)
    if res.hosts > 1:
        assert len({infos[a].labels["leaf"] for a in p.agents}) == 1, "gang split across leaves"
    elif not spread:
        def leftover(a: str) -> tuple[int, float, int]:
            return (len(before[a][2]), before[a][0], before[a][1])
        assert leftover(p.agents[0]) == min(leftover(a) for a in ok), "not the best fit"
    for a in p.agents:
        assert len(p.gpu_indices[a]) == res.gpus and set(p.gpu_indices[a]) <= set(before[a][2])


def assert_books_balance(c: Cluster, infos: dict[str, AgentInfo], held: dict[str, Demand]) -> None:
    used = {a: [0.0, 0, 0] for a in infos}
    gpus_taken: dict[str, list[int]] = {a: [] for a in infos}
    for run_id, d in held.items():
        p = c.reservation(run_id)
        assert p is not None
        for a in p.agents:
            used[a][0] += d.resources.cpu
            used[a][1] += d.resources.memory_mb
            gpus_taken[a] += p.gpu_indices[a]
    for a, info in infos.items():
        cpu, mem, free_gpus = c.free(a)
        assert used[a][0] <= info.cpu + 1e-9 and used[a][1] <= info.memory_mb, f"{a} over-committed"
        assert len(gpus_taken[a]) == len(set(gpus_taken[a])) <= info.gpus
        assert abs(cpu - (info.cpu - used[a][0])) < 1e-6 and mem == info.memory_mb - used[a][1]
        assert sorted(free_gpus + gpus_taken[a]) == list(range(info.gpus))
    for a, n in attempts_on(c, held).items():
        assert infos[a].slots is None or n <= infos[a].slots, f"{a} given more runs than its slots"


def test_adopt_counts_a_run_already_out_even_over_capacity_and_release_gives_it_back() -> None:
    # Given an agent with 4 cpu and a record saying a 3-cpu run with GPU 1 is out on it
    c = cluster(agent("a", cpu=4, gpus=2))
    assert c.adopt("old", Resources(cpu=3, memory_mb=1024, gpus=1), ["a"], {"a": [1]}) is True
    # Then the books hold it: the GPU it was given is not handed out again, the cpu is taken
    assert c.free("a") == (1.0, 16384 - 1024, [0])
    assert isinstance(c.place(demand("big", cpu=2)), Unplaced)
    # And adopting more than fits is recorded anyway (the records are the truth), leaving nothing free
    assert c.adopt("other", Resources(cpu=3, memory_mb=1024), ["a"], {}) is True
    assert c.free("a")[0] == 0
    c.release("old")
    c.release("other")
    assert c.free("a") == (4.0, 16384, [0, 1])


def test_adopt_waits_for_unknown_agents_and_is_idempotent() -> None:
    c = cluster(agent("a"))
    assert c.adopt("r", Resources(cpu=1), ["a", "b"], {}) is False
    assert c.reservation("r") is None and c.free("a")[0] == 8
    c.upsert_agent(agent("b"))
    assert c.adopt("r", Resources(cpu=1), ["a", "b"], {}) is True
    assert c.adopt("r", Resources(cpu=1), ["a", "b"], {}) is True
    assert c.free("a")[0] == 7 and c.free("b")[0] == 7


def test_shape_version_moves_only_when_what_agents_could_hold_changes() -> None:
    c = cluster(agent("a"))
    v = c.shape_version
    c.upsert_agent(agent("a"))  # a heartbeat
    assert c.shape_version == v
    c.upsert_agent(agent("a", cpu=16))
    assert c.shape_version > v
    v = c.shape_version
    c.remove_agent("a")
    assert c.shape_version > v


def test_used_resources_come_and_go_exactly() -> None:
    runs = [Resources(cpu=0.1, memory_mb=64), Resources(cpu=0.2, memory_mb=1, gpus=2),
            Resources(cpu=0.001, memory_mb=2)]
    used = Used()
    for r in runs * 1000:
        used = used.plus(r)
    assert (used.cpu, used.memory_mb, used.gpus) == (301.0, 67_000, 2000)
    for r in runs * 1000:
        used = used.minus(r)
    assert used == Used()  # millicores: no float drift after 6,000 steps


# --- slots: how many attempts an agent holds at once ----------------------------------------------

def test_pack_moves_on_once_every_slot_of_the_tightest_agent_is_taken() -> None:
    # Given two agents with room for many runs each but two slots each (the tighter one is `a`)
    c = cluster(agent("a", cpu=8, slots=2), agent("b", cpu=16, slots=2))
    # When five small runs come
    results = [c.place(demand(f"r{i}", cpu=0.1, mem=1)) for i in range(5)]
    # Then two go to a, two to b, and the fifth waits for a slot, saying so
    assert [r.agents for r in results[:4] if isinstance(r, Placement)] == [["a"], ["a"], ["b"], ["b"]]
    assert results[4] == Unplaced(run_id="r4", reason="no agent with a free slot (2 agents run as many attempts "
                                  "as their slots allow)", unsatisfiable=False)
    # And a slot freed on a is used again
    c.release("r0")
    assert placed_on(c.place(demand("r5", cpu=0.1, mem=1))) == ["a"]


def test_a_full_agent_is_not_named_as_the_largest_free_one() -> None:
    # Given a roomy agent with its one slot taken, and a small one with free slots
    c = cluster(agent("roomy", cpu=64, zone="eu", slots=1), agent("small", cpu=2, zone="eu"))
    assert placed_on(c.place(demand("r0", cpu=3, require={"zone": "eu"}))) == ["roomy"]
    # When a run fits neither (cpu on the small one, a slot on the roomy one)
    result = c.place(demand("big", cpu=4, require={"zone": "eu"}))
    # Then the reason names the small one: the roomy one can take nothing until a run ends
    assert result == Unplaced(run_id="big", reason="no agent with 4.0 free cpu and 1024 MB free memory matching "
                              "zone=eu (largest free: small with 2.0 cpu and 16384 MB)", unsatisfiable=False)


def test_a_constrained_run_waiting_only_for_slots_says_so() -> None:
    c = cluster(agent("eu1", zone="eu", slots=1), agent("us1", zone="us", slots=1))
    assert placed_on(c.place(demand("r0", require={"zone": "eu"}))) == ["eu1"]
    assert c.place(demand("r1", require={"zone": "eu"})) == Unplaced(
        run_id="r1", reason="no agent with a free slot matching zone=eu (1 agent runs as many attempts as its "
        "slots allow)", unsatisfiable=False)


def test_slots_follow_heartbeats_and_adoption() -> None:
    # Given an agent with two slots, both taken
    c = cluster(agent("a", slots=2))
    c.place(demand("r0", cpu=0.1))
    c.place(demand("r1", cpu=0.1))
    assert isinstance(c.place(demand("r2", cpu=0.1)), Unplaced)
    # When it comes back with three slots, one is free; with one, none (its two runs stay counted)
    c.upsert_agent(agent("a", slots=3))
    assert placed_on(c.place(demand("r2", cpu=0.1))) == ["a"]
    c.upsert_agent(agent("a", slots=1))
    c.release("r0")
    c.release("r1")
    assert isinstance(c.place(demand("r3", cpu=0.1)), Unplaced)
    c.release("r2")
    assert placed_on(c.place(demand("r3", cpu=0.1))) == ["a"]
    # And a run adopted from its record takes a slot even over the limit (the records are the truth)
    assert c.adopt("old", Resources(cpu=0.1), ["a"], {}) is True
    c.release("r3")
    assert isinstance(c.place(demand("r4", cpu=0.1)), Unplaced)
    c.release("old")
    assert placed_on(c.place(demand("r4", cpu=0.1))) == ["a"]


def test_a_gang_takes_a_slot_on_every_host() -> None:
    c = cluster(*(agent(f"h{i}", leaf="leaf-1", slots=1) for i in range(3)))
    assert sorted(placed_on(c.place(demand("g", cpu=1, hosts=3)))) == ["h0", "h1", "h2"]
    assert isinstance(c.place(demand("r", cpu=1)), Unplaced)
    c.release("g")
    assert placed_on(c.place(demand("r", cpu=1))) in (["h0"], ["h1"], ["h2"])

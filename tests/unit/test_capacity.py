"""The capacity summary placement publishes, and the submit-time check that must never cry wolf."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jetcron.core.models import AgentInfo, Priority, Resources
from jetcron.core.placing.capacity import CapacitySummary, summarize, unsatisfiable
from jetcron.core.placing.placement import Cluster, Demand, Placement

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def agent(agent_id: str, cpu: float = 8, mem: int = 16384, gpus: int = 0, *, model: str | None = None,
          leaf: str | None = None, zone: str | None = None, caps: list[str] | None = None) -> AgentInfo:
    labels = {k: v for k, v in (("leaf", leaf), ("zone", zone)) if v is not None}
    return AgentInfo(agent_id=agent_id, cpu=cpu, memory_mb=mem, gpus=gpus, gpu_model=model, labels=labels,
                     capabilities=caps or [], heartbeat_at=T0, started_at=T0)


def check(agents: list[AgentInfo], res: Resources, require: dict[str, str] | None = None,
          needs: list[str] | None = None) -> str | None:
    return unsatisfiable(res, require or {}, needs or [], summarize(agents, T0))


FLEET = [agent("agent-1", cpu=4), agent("agent-3", cpu=16, mem=8192), agent("agent-2", cpu=2, mem=65536),
         agent("g1", cpu=32, gpus=8, model="H100", leaf="l1", zone="eu"),
         agent("g2", cpu=32, gpus=8, model="H100", leaf="l1", zone="eu"),
         agent("g3", cpu=32, gpus=4, model="A100", leaf="l2", zone="us", caps=["docker", "container"])]


@pytest.mark.parametrize(("res", "require", "needs", "expected"), [
    pytest.param(Resources(cpu=64), {}, [], "no registered agent can ever fit 64 cpu (largest: g3 with 32 cpu)",
                 id="too_much_cpu_names_the_largest"),
    pytest.param(Resources(memory_mb=100_000), {}, [],
                 "no registered agent can ever fit 100000 MB memory (largest: agent-2 with 65536 MB)",
                 id="too_much_memory"),
    pytest.param(Resources(gpus=16), {}, [], "no registered agent can ever fit 16 GPUs (largest: g2 with 8 GPUs)",
                 id="too_many_gpus"),
    pytest.param(Resources(gpus=8, gpu_model="A100"), {}, [],
                 "no registered agent can ever fit 8 A100 GPUs (largest: g3 with 4 GPUs)", id="model_too_small"),
    pytest.param(Resources(gpus=1, gpu_model="B200"), {}, [], "no registered agent has GPU model B200",
                 id="unknown_model"),
    pytest.param(Resources(), {"zone": "mars"}, [], "no registered agent has label zone=mars", id="unknown_label"),
    pytest.param(Resources(), {}, ["podman"], "no registered agent has capability podman", id="unknown_capability"),
    pytest.param(Resources(gpus=8, hosts=3), {}, [],
                 "no leaf can ever hold 3 hosts × 8 GPUs (largest: l1 with 2)", id="gang_too_big_for_any_leaf"),
    pytest.param(Resources(gpus=4, hosts=2, gpu_model="A100"), {}, [],
                 "no leaf can ever hold 2 hosts × 4 A100 GPUs (largest: l2 with 1)", id="gang_model"),
    pytest.param(Resources(cpu=16), {}, [], None, id="fits_the_largest"),
    pytest.param(Resources(gpus=8, hosts=2), {}, [], None, id="gang_fits_one_leaf"),
    pytest.param(Resources(cpu=1), {"zone": "eu"}, ["docker"], None, id="label_and_cap_present_somewhere"),
])
def test_submit_check(res: Resources, require: dict[str, str], needs: list[str], expected: str | None) -> None:
    assert check(FLEET, res, require, needs) == expected


def test_no_agents_registered_is_a_cluster_starting_not_a_verdict() -> None:
    assert check([], Resources(cpu=1000)) is None


def test_the_summary_stays_small_with_many_agents_of_few_sizes() -> None:
    fleet = [agent(f"a{i}", cpu=16 + 16 * (i % 3), gpus=8 * (i % 2), model="H100" if i % 2 else None,
                   leaf=f"leaf-{i // 32}", zone=f"z{i % 3}") for i in range(10_000)]
    summary = summarize(fleet, T0)
    assert summary.agents == 10_000
    assert len(summary.largest) <= 4
    assert summary.leaves is not None and len(summary.leaves) <= 313 * 6
    assert summary.labels["zone"] == ["z0", "z1", "z2"]


def test_too_many_label_values_are_left_unchecked() -> None:
    fleet = [agent(f"a{i}", zone=f"z{i}") for i in range(1001)]
    summary = summarize(fleet, T0)
    assert "zone" not in summary.labels
    assert unsatisfiable(Resources(), {"zone": "nowhere"}, [], summary) is None


def test_the_summary_round_trips_as_json() -> None:
    import msgspec

    summary = summarize(FLEET, T0)
    assert msgspec.json.decode(msgspec.json.encode(summary), type=CapacitySummary) == summary


sizes = st.builds(agent, st.sampled_from(["a", "b", "c", "d", "e"]), st.sampled_from([1, 2, 4, 8, 16]),
                  st.sampled_from([1024, 4096, 16384]), st.sampled_from([0, 1, 4, 8]),
                  model=st.sampled_from([None, "H100"]), leaf=st.sampled_from([None, "l1", "l2"]),
                  zone=st.sampled_from([None, "eu", "us"]))
wants = st.builds(Resources, cpu=st.sampled_from([0.5, 1, 4, 16, 32]), memory_mb=st.sampled_from([512, 8192, 32768]),
                  gpus=st.sampled_from([0, 1, 8, 16]), gpu_model=st.sampled_from([None, "H100"]),
                  hosts=st.sampled_from([1, 1, 2, 3]))


@settings(max_examples=300, deadline=None)
@given(st.lists(sizes, min_size=1, max_size=8, unique_by=lambda a: a.agent_id), wants,
       st.sampled_from([{}, {"zone": "eu"}, {"leaf": "l1"}]))
def test_never_warns_about_a_job_that_an_idle_cluster_can_place(
        agents: list[AgentInfo], res: Resources, require: dict[str, str]) -> None:
    # Given the same agents, idle, in placement's core
    cluster = Cluster()
    for a in agents:
        cluster.upsert_agent(a)
    placed = cluster.place(Demand(run_id="r", tenant="t", priority=Priority.NORMAL, resources=res,
                                  require=require, enqueued_at=T0))
    # Then a job placement could place now never gets a submit-time warning
    if isinstance(placed, Placement):
        assert check(agents, res, require) is None
    # And a warning always agrees with placement's own verdict that it can never fit
    elif check(agents, res, require) is not None:
        assert placed.unsatisfiable

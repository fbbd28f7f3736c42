"""The benchmark harness does not rot: every scenario runs at a tiny size and yields a well-formed result.
One test per scenario, so a parallel run spreads them (each starts its own server and services).

`make test-bench` runs them (CI does, after `make test`): they check the benchmarks, not jetcron's behaviour,
and cost a sixth of the suite's CPU."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from bench.run import SCENARIOS, run_scenario

QUICK = [(module, quick) for module, _full, quick in SCENARIOS if quick is not None]


def _id(module: str, args: list[str]) -> str:
    flags = dict(zip(args[::2], args[1::2], strict=False))
    return module.removeprefix("bench.") + "".join(f"-{flags[f]}" for f in ("--mode", "--scenario") if f in flags)


EXPECTED: dict[str, set[str]] = {
    "throughput-sim": {"throughput_sim"}, "throughput-true": {"throughput_true"}, "latency": {"idle_single_run"},
    "hops": {"idle_hops"}, "floor": {"floor"}, "child_floor": {"child_floor"}, "launch_paths": {"launch_paths"},
    "shape_floor": {"shape_floor"}, "messages": {"messages"},
    "failover": {"failover_trigger", "failover_placement", "failover_agent"},
    "placement_core": {"placement_core"}, "profile": {"profile"},
    "trigger_start_delay-second": {"trigger_start_delay_second_20"},
    "trigger_start_delay-instant": {"trigger_start_delay_instant_50"},
    "trigger_takeover": {"trigger_takeover_50_ttl2"}, "trigger_memory": {"trigger_memory_2000"},
    "placement_memory": {"placement_memory_2000"}, "tracker_memory": {"tracker_memory_2000"},
    "agent_memory": {"agent_memory"},
    "longlife": {"longlife"}, "sizing": {"sizing"}, "fleet": {"fleet"},
    "finished": {"finished_tally", "finished_writes", "finished_read", "finished_per_run"},
    "batch_publish": {"batch_publish_r1"}, "expiry": {"expiry"}, "liveness": {"liveness"},
    "scale": {"scale_dead_hosts"}, "scale-steady_day": {"scale_steady_day"}, "scale-midnight": {"scale_midnight"},
    "dashboard": {"dashboard_pages"}, "peers": {"peers"},
}


def _check(result: dict[str, Any]) -> None:
    """What each result must say beyond its name (a figure that is missing or nonsense)."""
    name = result["bench"]
    if name == "throughput_sim":
        assert result["runs_per_s"]["median"] > 0 and 3 <= result["writes_per_run"]["median"] <= 20
    elif name == "throughput_true":
        assert result["bare_spawn_per_s"]["median"] > 0
        assert result.get("contained_spawn_per_s", {"median": 1})["median"] > 0
    elif name == "trigger_start_delay_second_20":
        assert result["started"]["median"] == result["expected"]["median"] == 40  # 20 schedules, 2 rounds
    elif name == "idle_hops" and "reps" in result:  # the summary, after each rep
        assert 0 < result["created_to_assigned_p50_ms"]["median"] < result["total_p50_ms"]["median"]
    elif name == "floor":  # exactly the protocol's eight writes per run, each acknowledged
        assert result["writes_per_run"]["median"] == 8 and result["floor_runs_per_s"]["median"] > 0
        assert 0 < result["idle_eight_writes_p50_ms"]["median"] < result["idle_floor_p50_ms"]["median"]
    elif name == "shape_floor":  # the four writes each, between processes, and every run through
        assert result["shape_writes_per_run"]["median"] == 4 and result["shape_runs_per_s"]["median"] > 0
        assert result["built_chain_idle_p50_ms"]["median"] > 0 and result["shape_idle_p50_ms"]["median"] > 0
        assert set(result["shape_cpu_ms_per_run"]) == {"driver", "trigger", "placement", "agent", "tracker"}
        assert result["shape_cpu_ms_per_run_stages"]["median"] > 0
    elif name == "messages":  # every process sent and was sent something; the runs bucket holds each run's record
        assert set(result["per_process_median"]) == {"api", "trigger", "placement", "run_tracker", "agent"}
        assert all(row["sent"] > 0 and row["bytes"] > 0 for row in result["per_process_median"].values())
        assert result["runs_bucket_bytes_per_run"]["median"] > 100
    elif name == "child_floor":  # every variant this host can run has a rate, each compared with bare spawns
        assert result["runs_per_s"]["bare"]["median"] > 0
        assert set(result["ratio_to_bare"]) | set(result["skipped"]) | {"bare"} >= {"bare", "launcher", "groups",
                                                                                      "contained"}
        assert all(0 < ratio["median"] < 3 for ratio in result["ratio_to_bare"].values())
    elif name == "launch_paths":  # every way this host can start a child has its CPU, or says why it has none
        assert result["child_cpu_ms_per_run"] or result["skipped"]
        assert all(cpu["median"] > 0 for cpu in result["child_cpu_ms_per_run"].values())
    elif name == "failover_agent":
        assert result["redispatch_s"]["median"] > 0
    elif name == "longlife":  # the ledger balanced, and every sample names each stream and process
        assert result["lost"] == result["recorded_twice"] == 0 and result["ledger"]["occurrences"] > 0
        samples = result["series_samples"]
        assert len(samples) == result["samples"] >= 3
        for sample in samples:
            assert {"KV_jc_runs", "JC_EVENTS"} <= set(sample["streams"]), sample["streams"]
            assert {"nats-server", "trigger", "agent-1"} <= set(sample["rss_bytes"]) and sample["rss_bytes"]["trigger"]
            assert "trigger" in sample["refusals"]
        assert samples[-1]["finished_writes"] >= result["ledger"]["finished"] > 0
    elif name == "finished_writes":  # every run counted once (asserted inside), far fewer writes than runs
        assert 0 < result["writes_per_run"] < 1
    elif name == "finished_read":
        assert result["read_hour_admin_records"] == result["read_hour_tenant_records"] == 60
    elif name == "finished_per_run":  # the server keeps each counter's running total (12 subjects, in turn)
        assert json.loads(result["counter_value"]) == {"val": str(result["reps"] * math.ceil(result["writes"] / 12))}
    elif name == "batch_publish_r1":  # every case committed or published something, each batch whole
        assert set(result["cases"]) == {"batch1_x2", "batch4_x2", "plain1_x2", "plain4_x2"}
        for case, figures in result["cases"].items():
            assert figures["steps_per_s"]["median"] > 0, case
            size = int(case.removeprefix("batch").removeprefix("plain").split("_")[0])
            assert figures["msgs_per_s"]["median"] == pytest.approx(size * figures["steps_per_s"]["median"])
    elif name == "expiry":  # each way wrote; nothing removed when kept, removals under the others
        assert set(result["cases"]) == {"kept", "rollup", "max_age", "ttl"}
        for mode, figures in result["cases"].items():
            assert figures["msgs_per_s"]["median"] > 0 and figures["written"]["median"] > 0, mode
            assert (figures["removed"]["median"] > 0) == (mode != "kept"), (mode, figures)
        assert result["of_kept"]["kept"] == 1
    elif name == "fleet":  # every run through the virtual agents once, at its first attempt; each fault seen
        for size in result["sizes"]:
            assert size["succeeded_first_attempt"] == size["reported_once"] == size["ended"] == size["runs"] > 0
            assert size["reported_twice_or_more"] == 0
            assert size["connections"] == size["assign_consumers"] == size["agents"]
            faults = size["faults"]
            assert faults["states_during"] == {"agent-1": "killed", "agent-2": "frozen", "agent-3": "cut off"}
            assert faults["states_after"] == {"agent-1": "killed", "agent-2": "running", "agent-3": "running"}
            assert faults["heartbeat_while_silent"] == [] and size["not_stopped"] == []
            assert set(faults["resumed_after_s"]) == {"agent-2", "agent-3"}, faults
            assert all(seconds is not None for seconds in faults["resumed_after_s"].values()), faults
            assert size["states_at_end"] == {"killed": 1, "running": size["agents"] - 1}
    elif name == "liveness":  # every run in flight through the window, none lost; the leases follow the agents
        assert result["lost_in_window"] == 0 and result["in_flight_at_end"] == [result["runs_in_flight"]]
        assert result["writes_per_s"]["heartbeats"]["median"] > 0
        # a renewal per run in flight every TTL/3 would be this many lease writes a second
        per_run = result["runs_in_flight"] / (result["run_lease_ttl"] / 3)
        assert 0 < result["writes_per_s"]["leases"]["median"] < per_run / 2
    elif name == "scale_dead_hosts":  # every run succeeded once; those of the dead and frozen agents ran again
        for rep in result["reps"]:
            assert rep["states"] == {"succeeded": rep["runs"]} and rep["succeeded_once"] == rep["runs"]
            assert rep["succeeded_twice_or_more"] == 0 and rep["held_by_dead_or_frozen"] > 0
            assert rep["others_at_attempt_1"] == rep["runs"] - rep["held_by_dead_or_frozen"]
            assert "1" not in rep["held_ended_at_attempt"] and rep["redispatch_max_s"] > 0
    elif name == "scale_steady_day":  # every run succeeded once; measured after the warm-up, every purpose named
        for rep in result["reps"]:
            assert rep["states"] == {"succeeded": rep["runs"]} == {"succeeded": rep["succeeded_once"]}
            assert rep["succeeded_twice_or_more"] == 0 and 0 < rep["measured_runs"] < rep["runs"]
            assert 0 < rep["submit_to_started_p50_s"] <= rep["submit_to_started_p99_s"]
            assert {"leases", "heartbeats", "records", "all"} <= set(rep["writes_per_s"])
            assert {"nats-server", "placement", "run_tracker"} <= set(rep["cpu_pct"])
    elif name == "scale_midnight":  # every run recorded ahead of the instant, succeeded once, every tenant started
        for rep in result["reps"]:
            assert rep["states"] == {"succeeded": rep["runs"]} and rep["succeeded_once"] == rep["runs"]
            assert rep["recorded_before_instant"] == rep["runs"] and rep["succeeded_twice_or_more"] == 0
            assert rep["first_wave_last_start_s"] <= rep["last_start_s"] and rep["assigned_before_instant"] > 0
            assert set(rep["tenant_shares"]) == {"alpha", "beta", "gamma"}
            assert {"trigger", "placement", "run_tracker"} <= set(rep["rss_peak_mib"])
    elif name == "dashboard_pages":
        assert result["jobs_page_p95_ms"]["median"] > 0 and result["agents_page_p95_ms"]["median"] > 0
    elif name == "placement_memory_2000":  # within the window the whole path holds the record and more; past it, less
        whole, record = result["bytes_per_waiting_run"]["median"], result["record_bytes_per_run"]["median"]
        assert whole > record > result["bytes_per_run_past_window"]["median"] > 0
        assert result["encoded_record_bytes"] > 0 and result["pass_seconds"]["median"] > 0
    elif name == "tracker_memory_2000":  # a waiting run in the index's form costs less than kept whole
        assert 0 < result["bytes_per_run"]["median"] < result["whole_bytes_per_run"]["median"]
        assert result["encoded_record_bytes"] > 0 and result["sweep_seconds"]["median"] > 0
    elif name == "agent_memory":  # both agents ran, each sampled throughout and collected at the end
        for agent in ("agent-1", "agent-2"):
            assert result[agent]["runs_warm_to_end"] > 0 and len(result[agent]["series"]) >= 3
            assert set(result[agent]["unreachable_at_end"]) == {"attempt.Attempt", "host.executor.Execution"}
        assert result["agent-1"]["heap_bytes_per_run"] and result["heap_growth_by_site"]
    elif name == "peers":  # every party measured, and each ratio its own two rates' quotient
        rates = {k: result[f"{k}_runs_per_s"]["median"] for k in ("jetcron_always", "jetcron_default", "bare_always",
                                                                    "bare_default")}
        assert min(rates.values()) > 0 and result["celery_tasks_per_s"]["median"] > 0
        assert result["jetcron_always_over_celery"]["median"] == pytest.approx(
            rates["jetcron_always"] / result["celery_tasks_per_s"]["median"])
    elif name == "sizing":
        for unit in ("run_record", "run_event", "log_line", "job_record"):
            assert result["bytes_per"][unit] > 0, unit


@pytest.mark.bench
@pytest.mark.timeout(300)
@pytest.mark.parametrize(("module", "args"), QUICK, ids=[_id(m, a) for m, a in QUICK])
def test_scenario_runs_at_smoke_size(module: str, args: list[str], tmp_path: Path) -> None:
    results = run_scenario(module, args, tmp_path)
    errors = [r for r in results if "error" in r]
    assert not errors, errors
    assert results, f"{module} printed no result"
    assert EXPECTED.get(_id(module, args), set()) <= {r["bench"] for r in results}
    for result in results:
        _check(result)
    assert list(tmp_path.glob("*.json")), "results were not written"

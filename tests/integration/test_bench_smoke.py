"""The benchmark harness does not rot: every scenario runs at a tiny size and yields a well-formed result."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(600)
def test_every_scenario_runs_at_smoke_size(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "bench.run", "--quick", "--out", str(tmp_path)], cwd=ROOT,
                          capture_output=True, text=True, timeout=580, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    errors = [r for r in results if "error" in r]
    assert not errors, errors
    names = {r["bench"] for r in results}
    assert {"throughput_sim", "throughput_true", "idle_single_run", "idle_hops", "failover_trigger",
            "failover_placement", "failover_agent", "placement_core", "profile", "trigger_start_delay_second_20",
            "trigger_start_delay_instant_50", "trigger_takeover_50_ttl2", "trigger_memory_2000"} <= names
    sim = next(r for r in results if r["bench"] == "throughput_sim")
    assert sim["runs_per_s"]["median"] > 0 and 3 <= sim["writes_per_run"]["median"] <= 20
    real = next(r for r in results if r["bench"] == "throughput_true")
    assert real["bare_spawn_per_s"]["median"] > 0
    delay = next(r for r in results if r["bench"] == "trigger_start_delay_second_20")
    assert delay["started"]["median"] == delay["expected"]["median"] == 40  # 20 schedules, 2 rounds
    hops = next(r for r in results if r["bench"] == "idle_hops" and "reps" in r)  # the summary, after each rep
    assert 0 < hops["place_to_assigned_p50_ms"]["median"] < hops["total_p50_ms"]["median"]
    agent = next(r for r in results if r["bench"] == "failover_agent")
    assert agent["redispatch_s"]["median"] > 0
    assert list(tmp_path.glob("*.json")), "results were not written"

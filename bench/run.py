"""`make bench`: every scenario, results as JSON in bench/results/ and their tables in docs/benchmarks-results.md."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
DOC = ROOT / "docs" / "benchmarks-results.md"
START, END = "<!-- generated: bench/run.py -->", "<!-- end generated -->"

# The scale scenarios (`make bench-scale`, docs/benchmarks.md "Scale"): the largest sizes this machine carries
STEADY_DAY = ["--scenario", "steady_day", "--agents", "500", "--slots", "5", "--heartbeat", "30", "--ttl", "90",
              "--seconds", "30", "--reps", "2"]
MIDNIGHT = ["--scenario", "midnight", "--runs", "30000", "--seconds", "10", "--heartbeat", "30", "--ttl", "90",
            "--reps", "3"]

# (module, full-size arguments, quick arguments for the smoke test; None: a size-only variant the smoke test skips)
SCENARIOS: list[tuple[str, list[str], list[str] | None]] = [
    (
        "bench.throughput",
        ["--mode", "sim", "--runs", "20000", "--reps", "3"],
        ["--mode", "sim", "--runs", "200", "--reps", "1", "--sync", "default"],
    ),
    (
        "bench.throughput",
        ["--mode", "true", "--runs", "5000", "--reps", "3"],
        ["--mode", "true", "--runs", "50", "--reps", "1", "--sync", "default"],
    ),
    # finish reports handed to the trackers directly against every one on the events stream's trail, one after the
    # other in each repetition (report_sim_*.json): what JETCRON_REPORT_BY=stream costs
    ("bench.throughput", ["--mode", "sim", "--runs", "5000", "--reps", "3", "--sync", "always", "--report-by",
                          "direct,stream"], None),
    # finish reports handed over a few dozen to a request against one to a request (report_batch_sim_*.json)
    ("bench.throughput", ["--mode", "sim", "--runs", "5000", "--reps", "3", "--sync", "always", "--report-batch",
                          "32,1"], None),
    ("bench.latency", ["--runs", "200", "--reps", "3"], ["--runs", "5", "--reps", "1", "--sync", "always"]),
    ("bench.hops", ["--runs", "100", "--reps", "3", "--spare", "both"], ["--runs", "5", "--reps", "1"]),
    # messages per run per process, priced at nats-py's own CPU per message (docs/decisions-protocol.md)
    ("bench.messages", ["--runs", "5000", "--reps", "3"], ["--runs", "30", "--reps", "1"]),
    ("bench.floor", ["--reps", "3"], ["--runs", "50", "--idle-runs", "5", "--reps", "1", "--sync", "always"]),
    # what a real run's child costs the host with no message at all, against bare spawns (docs/benchmarks.md)
    # the built floor's four writes made by five processes as the services make them, beside jetcron in one window
    ("bench.shape_floor", ["--runs", "5000", "--reps", "3"], ["--runs", "60", "--idle-runs", "3", "--reps", "1"]),
    ("bench.child_floor", ["--runs", "2000", "--reps", "3"], ["--runs", "40", "--reps", "1", "--idle-runs", "5"]),
    # the CPU of each way a run's child starts: jetcron-launch or its Python twin, spawned or from a spare
    # (docs/decisions-job-view.md)
    ("bench.launch_paths", ["--runs", "150", "--reps", "3"], ["--runs", "3", "--reps", "1"]),
    # atomic batches against plain publishes, R1 and R3 (docs/decisions-protocol.md): about 7 minutes
    ("bench.batch_publish", [], ["--sizes", "1,4", "--in-flight", "2", "--seconds", "0.3", "--reps", "1",
                                 "--nodes", "1"]),
    # what removing old messages (TTL, max_age, rollups) costs a stream's writes (docs/decisions-nats.md)
    ("bench.expiry", [], ["--life", "1", "--seconds", "2", "--in-flight", "4", "--reps", "1"]),
    ("bench.failover", ["--reps", "3"], ["--reps", "1"]),
    ("bench.security", ["--reps", "3"], ["--latency-runs", "5", "--throughput-runs", "30", "--reps", "1"]),
    ("bench.rest", ["--reps", "3"], ["--latency-runs", "3", "--throughput-jobs", "50", "--reps", "1"]),
    # 1,000,000 records: about 4 minutes, most of it writing them
    ("bench.listing", ["--reps", "1", "--jobs", "1000"],
     ["--jobs", "3", "--per-job", "50", "--running", "50", "--requests", "3"]),
    # 100,000 jobs through the API (about 90 s a repetition) and 10,000 agents registered
    ("bench.dashboard", ["--jobs", "100000", "--agents", "10000", "--requests", "100", "--reps", "3"],
     ["--jobs", "60", "--agents", "60", "--requests", "3", "--reps", "1"]),
    ("bench.notify", ["--reps", "3"], ["--idle-runs", "3", "--burst", "20", "--reps", "1"]),
    ("bench.placement_core", [], ["--rounds", "1"]),
    ("bench.placement_fairness", [], ["--reps", "1"]),
    ("bench.placement_gang", [], ["--reps", "1"]),
    ("bench.placement_e2e", ["--reps", "3", "--runs", "3000"], ["--reps", "1", "--runs", "100", "--agents", "50"]),
    # the virtual fleet's cost by size (docs/fleet.md): one process carries ~500 agents on this machine
    ("bench.fleet", ["--sizes", "50,200,500", "--runs", "1000", "--faults"],
     ["--sizes", "5", "--runs", "10", "--faults", "--window", "2", "--heartbeat", "1"]),
    # writes by purpose with 500 runs in flight: the leases follow the agents, not the runs (docs/decisions-protocol.md)
    ("bench.liveness", [], ["--agents", "4", "--slots", "3", "--seconds", "40", "--window", "4", "--settle", "2",
                            "--ttl", "3", "--reps", "1"]),
    # 300 agents x 5 slots, 100 killed and 100 frozen at once with every slot running (docs/benchmarks.md, "Scale")
    ("bench.scale", ["--scenario", "dead_hosts", "--reps", "3"],
     ["--agents", "10", "--slots", "2", "--kill", "2", "--freeze", "2", "--seconds", "30", "--ttl", "4",
      "--heartbeat", "0.5", "--reps", "1", "--series", "-"]),
    # 300 agents x 5 slots taking 50 runs/s for 10 minutes among 100,000 cron schedules (docs/benchmarks.md, "Scale")
    ("bench.scale", STEADY_DAY,
     ["--scenario", "steady_day", "--schedules", "50", "--agents", "5", "--slots", "4", "--rate", "5",
      "--minutes", "0.5", "--warmup", "10", "--seconds", "2", "--reps", "1", "--series", "-"]),
    # 30,000 runs due at one instant on 300 agents x 5 slots (20 times the fleet, as 1,000,000 is to 50,000)
    ("bench.scale", MIDNIGHT,
     ["--scenario", "midnight", "--runs", "60", "--agents", "4", "--slots", "3", "--seconds", "2", "--lead", "15",
      "--ttl", "4", "--heartbeat", "0.5", "--reps", "1", "--series", "-"]),
    ("bench.profile", ["--runs", "6000"], ["--runs", "300", "--seconds", "4"]),
    # `jetcron --help` and `jobs list`: the CLI's start, most of it imports (target under 0.2 s)
    ("bench.cli_start", ["--reps", "15"], ["--reps", "1"]),
    ("bench.trigger_start_delay", ["--scenario", "second", "--schedules", "1000", "--reps", "3"],
     ["--scenario", "second", "--schedules", "20", "--reps", "1", "--rounds", "2", "--period", "3", "--lead", "3"]),
    ("bench.trigger_takeover", ["--schedules", "1000"], ["--schedules", "50", "--reps", "1", "--every", "2"]),
    ("bench.trigger_takeover", ["--schedules", "100000", "--every", "600"], None),
    ("bench.trigger_memory", [], ["--sizes", "2000", "--reps", "1"]),
    ("bench.placement_memory", [], ["--sizes", "2000", "--reps", "1"]),
    ("bench.tracker_memory", [], ["--sizes", "2000", "--reps", "1"]),
    # an agent's memory over 10,000 sim runs each (two agents, one traced): about 5 minutes (docs/benchmarks.md,
    # "Long life")
    ("bench.agent_memory", [], ["--runs", "200", "--jobs", "20", "--warmup", "2", "--sample-seconds", "3",
                                "--settle", "3", "--frames", "4"]),
    # jetcron beside Celery on Redis and a bare JetStream pipeline, in one window (`make bench-peers`)
    ("bench.peers", [], ["--runs", "100", "--tasks", "200", "--reps", "1"]),
    # ~9 minutes at 300 runs/s, a few past the retention window; the 3,000,000-run size is `make bench-longlife`
    ("bench.longlife", ["--runs", "150000", "--sample-seconds", "30"],
     ["--runs", "200", "--jobs", "20", "--sample-seconds", "2", "--settle", "5", "--drain", "30", "--series", "-"]),
    # the finished runs per minute (docs/dashboard.md): a minute or two, most of it filling 7 days of minutes
    ("bench.finished", [], ["--rate", "50", "--tenants", "3", "--seconds", "3", "--days", "0.05", "--reps", "2",
                            "--per-run-writes", "200", "--per-run-read", "500", "--per-run-reps", "1"]),
    ("bench.sizing", [], ["--runs", "40", "--sim-jobs", "10", "--jobs", "20", "--log-runs", "4", "--lines", "20"]),
    # last: the longest (minutes per repetition on 2 cores)
    # lead: ~85 s to store 100,000 jobs, then 100,000 / 200 runs/s (the default herd rate) of staging
    ("bench.trigger_start_delay", ["--scenario", "instant", "--schedules", "100000", "--reps", "3", "--lead", "600",
                                   "--timeout", "600"],
     ["--scenario", "instant", "--schedules", "50", "--reps", "1", "--lead", "3", "--timeout", "30"]),
]


def run_scenario(module: str, args: list[str], out: Path) -> list[dict[str, Any]]:
    proc = subprocess.run([sys.executable, "-m", module, *args], cwd=ROOT, capture_output=True, text=True, check=False)
    results = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0:
        results.append({"bench": module, "error": proc.stderr[-2000:]})
    for result in results:
        name = result.get("bench", module)
        sync = {True: "_always", False: "_default"}.get(result.get("sync_always"), "")  # type: ignore[arg-type]
        (out / f"{name}{sync}.json").write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
    return results


def _cell(value: Any) -> str:
    if isinstance(value, dict) and "median" in value:
        return f"{value['median']:.4g} [{value['min']:.4g}–{value['max']:.4g}]"
    if isinstance(value, float):
        return f"{value:.4g}"
    return json.dumps(value) if isinstance(value, (dict, list)) else str(value)


def render(results_dir: Path) -> str:
    lines = [
        START,
        "",
        f"Generated {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} from `bench/results/*.json`.",
        "Figures are median [min–max] over the repetitions named by `n`.",
        "",
    ]
    for path in sorted(results_dir.glob("*.json")):
        data = json.loads(path.read_text())
        lines += [f"### {path.stem}", "", "| metric | value |", "|---|---|"]
        lines += [f"| {k} | {_cell(v)} |" for k, v in sorted(data.items()) if k != "bench"]
        lines.append("")
    lines.append(END)
    return "\n".join(lines)


def write_doc(results_dir: Path, doc: Path) -> None:
    """Replace only the generated part; hand-written analysis around it stays."""
    text = doc.read_text() if doc.exists() else "# Benchmarks\n\n"
    block = render(results_dir)
    if START in text and END in text:
        text = text[: text.index(START)] + block + text[text.index(END) + len(END) :]
    else:
        text = text.rstrip() + "\n\n" + block + "\n"
    doc.write_text(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="tiny sizes: checks the harness, measures nothing")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--only", default="", help="comma-separated module names")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    for module, full, quick in SCENARIOS:
        if args.only and module not in args.only.split(","):
            continue
        if args.quick and quick is None:
            continue
        for result in run_scenario(module, quick if args.quick and quick is not None else full, args.out):
            print(json.dumps(result, sort_keys=True), flush=True)
    if not args.quick:
        write_doc(args.out, DOC)


if __name__ == "__main__":
    main()

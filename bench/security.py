"""The price of authentication (and TLS, when the server has it): idle submit -> succeeded latency and sim
throughput with security off and on, interleaved in each repetition so both see the same machine."""

from __future__ import annotations

import argparse
import asyncio

from bench.common import emit, percentile, summary, system
from bench.latency import _one_at_a_time
from bench.throughput import _submit_and_wait

MODES: dict[str, dict[str, bool]] = {"off": {}, "auth": {"auth": True}, "auth_tls": {"auth": True, "tls": True}}


def run(latency_runs: int, throughput_runs: int, reps: int) -> dict[str, object]:
    p50: dict[str, list[float]] = {m: [] for m in MODES}
    p99: dict[str, list[float]] = {m: [] for m in MODES}
    rate: dict[str, list[float]] = {m: [] for m in MODES}
    for rep in range(reps):
        for mode, options in MODES.items():
            with system(sync_always=True, agents=1, **options) as jc:
                lat = asyncio.run(_one_at_a_time(jc.url, latency_runs, jc.identity))
                p50[mode].append(percentile(lat, 50) * 1000)
                p99[mode].append(percentile(lat, 99) * 1000)
            with system(sync_always=True, agents=2, sim=True, **options) as jc:
                elapsed, done = asyncio.run(_submit_and_wait(jc.url, throughput_runs, ["true"], f"s{rep}x",
                                                             jc.identity))
                rate[mode].append(done / elapsed)
    result: dict[str, object] = {"bench": "security_overhead", "sync_always": True, "reps": reps,
                                 "latency_runs": latency_runs, "throughput_runs": throughput_runs}
    for mode in MODES:
        result[f"{mode}_submit_to_succeeded_p50_ms"] = summary(p50[mode])
        result[f"{mode}_submit_to_succeeded_p99_ms"] = summary(p99[mode])
        result[f"{mode}_sim_runs_per_s"] = summary(rate[mode])
    off = summary(rate["off"])["median"]
    for mode in ("auth", "auth_tls"):
        result[f"{mode}_throughput_ratio"] = round(summary(rate[mode])["median"] / off, 3) if off else None
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--latency-runs", type=int, default=100)
    parser.add_argument("--throughput-runs", type=int, default=3000)
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    emit(run(args.latency_runs, args.throughput_runs, args.reps))


if __name__ == "__main__":
    main()

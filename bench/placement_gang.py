"""Gang placement time in the placement core: 64-GPU jobs (8 hosts x 8 GPUs, one leaf) on 1,000 GPU hosts.

1,000 hosts with 8 H100s each, 32 hosts per leaf switch (32 leaves). The cluster is first fragmented with
single-host GPU runs (1, 2, 4 or 8 GPUs) to a target utilisation; then 64-GPU gangs are placed one after
another, each timed, until none fits; then one more is timed failing (it must compute which leaf comes
closest). Prints one JSON line per utilisation and `python -m bench.run` keeps each in bench/results/<bench>.json.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from datetime import UTC, datetime

from jetcron.core.models import AgentInfo, Priority, Resources
from jetcron.core.placing.placement import Cluster, Demand, Placement

T0 = datetime(2026, 1, 1, tzinfo=UTC)
HOSTS, PER_LEAF, GPUS = 1000, 32, 8
REPS = 5


def fleet() -> Cluster:
    c = Cluster()
    for i in range(HOSTS):
        c.upsert_agent(AgentInfo(agent_id=f"h{i:04d}", cpu=96, memory_mb=1 << 20, gpus=GPUS, gpu_model="H100",
                                 labels={"leaf": f"leaf-{i // PER_LEAF:02d}"}, heartbeat_at=T0, started_at=T0))
    return c


def demand(run_id: str, gpus: int, hosts: int = 1) -> Demand:
    return Demand(run_id=run_id, tenant="t", priority=Priority.NORMAL,
                  resources=Resources(cpu=8, memory_mb=65536, gpus=gpus, hosts=hosts), enqueued_at=T0)


def one(seed: int, utilisation: float) -> tuple[list[float], float, int]:
    rng = random.Random(seed)
    c = fleet()
    used, i = 0, 0
    while used < utilisation * HOSTS * GPUS:
        g = rng.choice([1, 2, 4, 8])
        if isinstance(c.place(demand(f"s{i}", g)), Placement):
            used += g
        i += 1
    times = []
    n = 0
    while True:
        start = time.perf_counter()
        result = c.place(demand(f"gang{n}", 8, hosts=8))
        elapsed = time.perf_counter() - start
        if not isinstance(result, Placement):
            return times, elapsed, n
        assert len({int(h[1:]) // PER_LEAF for h in result.agents}) == 1, "a gang spans one leaf"
        times.append(elapsed)
        n += 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--reps", type=int, default=REPS)
    reps = parser.parse_args().reps
    for utilisation in (0.0, 0.5, 0.8):
        placed, failed, counts = [], [], []
        for seed in range(reps):
            times, fail, n = one(seed, utilisation)
            placed.extend(times)
            failed.append(fail)
            counts.append(n)
        result = {
            "bench": f"placement_gang_frag{round(utilisation * 100)}", "hosts": HOSTS, "hosts_per_leaf": PER_LEAF,
            "gang": "8 hosts x 8 GPUs",
            "fragmented_to": utilisation, "reps": reps, "gangs_placed_per_rep": statistics.median(counts),
            "place_ms": {"median": round(statistics.median(placed) * 1e3, 3),
                         "p99": round(sorted(placed)[int(0.99 * (len(placed) - 1))] * 1e3, 3),
                         "min": round(min(placed) * 1e3, 3), "max": round(max(placed) * 1e3, 3), "n": len(placed)},
            "no_fit_reason_ms": {"median": round(statistics.median(failed) * 1e3, 3),
                                 "min": round(min(failed) * 1e3, 3), "max": round(max(failed) * 1e3, 3)},
            "python": sys.version.split()[0],
        }
        print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()

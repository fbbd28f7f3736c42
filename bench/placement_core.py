"""Placement core throughput: place() + release() decisions per second on 10,000 agents, 5 tenants.

Prints one JSON line. The cluster is first filled to a steady state; each timed decision then
releases the oldest reservation and places a new demand (served through the FairQueue in the
second figure), so the index is exercised under churn rather than on an empty cluster.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta

from jetcron.core.models import AgentInfo, Priority, Resources, TenantPolicy
from jetcron.core.placing.fairness import FairQueue
from jetcron.core.placing.placement import Cluster, Demand, Placement

AGENTS = 10_000
TENANTS = [f"tenant-{i}" for i in range(5)]
WARM = 20_000
DECISIONS = 20_000
ROUNDS = 5
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def agents(rng: random.Random) -> list[AgentInfo]:
    out = []
    for i in range(AGENTS):
        gpu = i % 5 == 0
        out.append(AgentInfo(
            agent_id=f"agent-{i}", cpu=rng.choice([16, 32, 64]),
            memory_mb=rng.choice([65536, 131072, 262144]),
            gpus=8 if gpu else 0, gpu_model=rng.choice(["A100", "H100"]) if gpu else None,
            labels={"zone": f"zone-{i % 3}", "rack": f"rack-{i // 40}", "leaf": f"leaf-{i // 32}"},
            capabilities=["docker"] if i % 4 else [], heartbeat_at=T0, started_at=T0,
        ))
    return out


def demands(rng: random.Random, n: int) -> list[Demand]:
    out = []
    for i in range(n):
        roll = rng.random()
        gpus = rng.choice([1, 2, 4]) if roll < 0.1 else 0
        require = {"zone": f"zone-{rng.randrange(3)}"} if 0.1 <= roll < 0.15 else {}
        needs = ["docker"] if 0.15 <= roll < 0.2 else []
        out.append(Demand(
            run_id=f"run-{i}", tenant=rng.choice(TENANTS), priority=rng.choice(list(Priority)),
            resources=Resources(cpu=rng.choice([0.5, 1, 2, 4, 8]),
                                memory_mb=rng.choice([512, 2048, 8192, 16384]), gpus=gpus),
            require=require, needs=needs, enqueued_at=T0 + timedelta(milliseconds=i),
        ))
    return out


def one_round(seed: int, with_queue: bool) -> tuple[float, float]:
    """Decisions per wall second and per CPU second (the latter is steadier on a shared machine)."""
    rng = random.Random(seed)
    cluster = Cluster()
    for info in agents(rng):
        cluster.upsert_agent(info)
    work = demands(rng, WARM + DECISIONS)
    live: list[Demand] = []
    for d in work[:WARM]:
        if isinstance(cluster.place(d), Placement):
            live.append(d)
    queue = FairQueue({t: TenantPolicy(tenant=t, weight=1 + i) for i, t in enumerate(TENANTS)})
    now = T0 + timedelta(hours=1)
    head = 0
    start, cpu_start = time.perf_counter(), time.process_time()
    for d in work[WARM:]:
        if head < len(live):
            gone = live[head]
            head += 1
            cluster.release(gone.run_id)
            if with_queue:
                queue.refund(gone)
        if not with_queue:
            if isinstance(cluster.place(d), Placement):
                live.append(d)
            continue
        queue.push(d)
        for c in queue.candidates(now):
            if queue.quota_block(c) is None and isinstance(cluster.place(c), Placement):
                queue.remove(c.run_id)
                queue.charge(c)
                live.append(c)
            break  # one decision per step: the next step starts a fresh pass
    return DECISIONS / (time.perf_counter() - start), DECISIONS / (time.process_time() - cpu_start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=ROUNDS, help="repetitions of each figure")
    rounds = parser.parse_args().rounds
    core_both = [one_round(seed, with_queue=False) for seed in range(rounds)]
    queued_both = [one_round(seed, with_queue=True) for seed in range(rounds)]
    core, queued = [w for w, _ in core_both], [w for w, _ in queued_both]
    core_cpu, queued_cpu = [c for _, c in core_both], [c for _, c in queued_both]
    result = {
        "bench": "placement_core", "agents": AGENTS, "tenants": len(TENANTS),
        "decisions_per_s": round(statistics.median(core)), "median_of": rounds,
        "min": round(min(core)), "max": round(max(core)),
        "with_fair_queue_decisions_per_s": round(statistics.median(queued)),
        "with_fair_queue_min": round(min(queued)), "with_fair_queue_max": round(max(queued)),
        "decisions_per_cpu_s": {"median": round(statistics.median(core_cpu)), "min": round(min(core_cpu)),
                                "max": round(max(core_cpu)), "n": rounds},
        "with_fair_queue_decisions_per_cpu_s": {"median": round(statistics.median(queued_cpu)),
                                                "min": round(min(queued_cpu)), "max": round(max(queued_cpu)),
                                                "n": rounds},
        "python": sys.version.split()[0],
    }
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()

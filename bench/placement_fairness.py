"""Fairness of the placement core: two tenants of equal weight, one submitting 10x the other's volume.

A discrete-event simulation over the real FairQueue and Cluster (no server): 100 one-cpu slots, every
run needs one slot for a random 0.5-1.5 s of simulated time; tenant "big" submits 10,000 runs, tenant
"small" 1,000, all at t=0. While both tenants have runs waiting, each tenant's share of the busy
capacity (slot-seconds) is measured; the target is 0.5 ± 10 % (0.45-0.55). Prints one JSON line per
weight setting and `python -m bench.run` keeps each in bench/results/<bench>.json.
"""

from __future__ import annotations

import argparse
import heapq
import json
import random
import statistics
import sys
from datetime import UTC, datetime, timedelta

from jetcron.core.models import AgentInfo, Priority, Resources, TenantPolicy
from jetcron.core.placing.fairness import FairQueue
from jetcron.core.placing.placement import Cluster, Demand, Placement

T0 = datetime(2026, 1, 1, tzinfo=UTC)
SLOTS = 100
VOLUMES = {"big": 10_000, "small": 1_000}
REPS = 5


def simulate(seed: int, weights: dict[str, float]) -> dict[str, float]:
    rng = random.Random(seed)
    cluster = Cluster()
    for i in range(SLOTS // 4):
        cluster.upsert_agent(AgentInfo(agent_id=f"a{i}", cpu=4, memory_mb=1 << 20, heartbeat_at=T0, started_at=T0))
    queue = FairQueue({t: TenantPolicy(tenant=t, weight=w) for t, w in weights.items()})
    demands: dict[str, Demand] = {}
    order = [(t, i) for t, n in VOLUMES.items() for i in range(n)]
    rng.shuffle(order)  # the two streams interleave in arrival order; all arrive at t=0
    for n, (tenant, i) in enumerate(order):
        d = Demand(run_id=f"{tenant}-{i}", tenant=tenant, priority=Priority.NORMAL,
                   resources=Resources(cpu=1, memory_mb=1), enqueued_at=T0 + timedelta(microseconds=n))
        demands[d.run_id] = d
        queue.push(d)
    now = 0.0
    ends: list[tuple[float, str]] = []
    busy = {t: 0.0 for t in VOLUMES}
    running = {t: 0 for t in VOLUMES}
    while len(queue) or ends:
        # Place as much as fits now, in the queue's order.
        for d in queue.candidates(T0):
            if queue.quota_block(d) is not None or not isinstance(cluster.place(d), Placement):
                break  # every run is the same size: once one does not fit, none does (the service goes on)
            queue.remove(d.run_id)
            queue.charge(d)
            running[d.tenant] += 1
            heapq.heappush(ends, (now + rng.uniform(0.5, 1.5), d.run_id))
        both_waiting = all(queue.waiting(t) for t in VOLUMES)
        at, run_id = heapq.heappop(ends)
        if both_waiting:
            for t in VOLUMES:
                busy[t] += running[t] * (at - now)
        now = at
        d = demands[run_id]
        cluster.release(run_id)
        queue.refund(d)
        running[d.tenant] -= 1
        while ends and ends[0][0] == now:  # finish everything ending at the same instant before placing
            _, other = heapq.heappop(ends)
            cluster.release(other)
            queue.refund(demands[other])
            running[demands[other].tenant] -= 1
    total = sum(busy.values())
    return {t: busy[t] / total for t in VOLUMES}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--reps", type=int, default=REPS)
    reps = parser.parse_args().reps
    for label, weights in (("equal", {"big": 1.0, "small": 1.0}), ("small_x2", {"big": 1.0, "small": 2.0})):
        shares = [simulate(seed, weights) for seed in range(reps)]
        small = [s["small"] for s in shares]
        target = weights["small"] / sum(weights.values())
        result = {
            "bench": f"placement_fairness_{label}", "weights": weights, "slots": SLOTS, "volumes": VOLUMES,
            "target_share_small": round(target, 4),
            "share_small": {"median": round(statistics.median(small), 4), "min": round(min(small), 4),
                            "max": round(max(small), 4), "n": reps},
            "worst_relative_error": round(max(abs(x - target) / target for x in small), 4),
            "within_10_percent": all(abs(x - target) / target <= 0.10 for x in small),
            "python": sys.version.split()[0],
        }
        print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()

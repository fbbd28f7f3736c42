"""Writes by purpose while runs are in flight: what keeps them alive is each agent's own lease, not the runs.

One system (nats-server with fsync before ack, api, trigger, placement, run tracker) and a virtual fleet
(bench/fleet.py: the agent's own code, simulated executions) of `--agents` agents with `--slots` slots each; as
many runs as slots are submitted, each simulated to run `--seconds`, and once every one is running the server's
writes are counted per stream for `--window` seconds: the lease bucket (run claims, agents' own leases), the agents
registry (heartbeats), the runs bucket (records), the events stream (reports), the dispatch streams, the leader and
shard leases, the services' registry, and all streams together.
Each run goes on past the window, so the window holds only what keeps runs in flight alive. `--reps` times; the
runs lost in the window (the tracker's "run lease gone") must be 0. Prints one JSON line: medians [min-max] of each
stream's writes/s, and the lease writes per second per run in flight. (Liveness per run, one renewal per run every
TTL/3, measured beside it until it was removed: docs/decisions-protocol.md.)
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
import time
from typing import Any

from bench.common import System, emit, submit_now_jobs, summary, system
from bench.fleet import Fleet, _stream_seq, _total_stored
from jetcron.config import Settings
from jetcron.core.host.sim import SimExecution
from jetcron.sdk.client import Client
from jetcron.wire import subjects as s

PURPOSES = {
    "leases": f"KV_{s.BUCKET_LEASES}", "heartbeats": f"KV_{s.BUCKET_AGENTS}", "records": f"KV_{s.BUCKET_RUNS}",
    "reports": s.STREAM_EVENTS, "assign": s.STREAM_ASSIGN, "place": s.STREAM_PLACE,
    "leaders": f"KV_{s.BUCKET_LEADERS}", "services": f"KV_{s.BUCKET_SERVICES}",
}


def _lost(jc: System) -> int:
    path = jc.base / "run_tracker.log"
    return path.read_text(errors="replace").count("run lease gone") if path.exists() else 0


async def _submit(jc: System, runs: int) -> None:
    client = await Client.connect(jc.url, timeout=60, identity=jc.identity)
    try:
        await submit_now_jobs(client, "lv", runs, ["true"], concurrency=32)
    finally:
        await client.close()


def _running(fleet: Fleet) -> int:
    return sum(len(member.agent.attempts) for member in fleet.agents.values() if member.agent is not None)


def measure(args: argparse.Namespace) -> dict[str, Any]:
    runs = args.agents * args.slots
    with system(sync_always=True, services=("api", "trigger", "placement", "run_tracker"),
                JETCRON_RUN_LEASE_TTL=str(args.ttl)) as jc:
        base = Settings(nats_url=jc.url, nats_monitor_url=jc.server.monitor_url, data_dir=str(jc.base),
                        heartbeat=args.heartbeat, run_lease_ttl=args.ttl, agent_cpu=float(args.slots),
                        agent_memory_mb=1024 * args.slots)
        fleet = Fleet(base, args.agents, slots=args.slots, sim=SimExecution.parse(f"fixed:{args.seconds}", "0"))
        # the virtual agents' JSON logs (structlog's, bound to stdout at boot): this bench's line is the only one
        with open(os.devnull, "w") as quiet, contextlib.redirect_stdout(quiet):
            fleet.start(timeout=max(120.0, args.agents / 10))
            try:
                started = time.monotonic()
                asyncio.run(_submit(jc, runs))
                while _running(fleet) < runs:
                    if time.monotonic() - started > args.seconds / 2:
                        raise RuntimeError(f"only {_running(fleet)} of {runs} runs started in {args.seconds / 2}s")
                    time.sleep(0.5)
                time.sleep(args.settle)  # the start reports and the first looks of the tracker are behind us
                seq0, lost0, t0 = {p: _stream_seq(jc, n) for p, n in PURPOSES.items()}, _lost(jc), time.monotonic()
                all0 = _total_stored(jc)
                time.sleep(args.window)
                seq1, lost1, t1 = {p: _stream_seq(jc, n) for p, n in PURPOSES.items()}, _lost(jc), time.monotonic()
                all1 = _total_stored(jc)
                in_flight = _running(fleet)
            finally:
                fleet.stop()
    span = t1 - t0
    per_s = {p: (seq1[p] - seq0[p]) / span for p in PURPOSES}
    per_s["all"] = (all1 - all0) / span
    return {"writes_per_s": per_s, "lease_writes_per_run_per_s": per_s["leases"] / runs,
            "in_flight_at_end": in_flight, "lost_in_window": lost1 - lost0}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--agents", type=int, default=100)
    parser.add_argument("--slots", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=90.0, help="each simulated run's duration")
    parser.add_argument("--window", type=float, default=20.0, help="seconds counted, all runs in flight")
    parser.add_argument("--settle", type=float, default=5.0)
    parser.add_argument("--ttl", type=float, default=10.0, help="JETCRON_RUN_LEASE_TTL (renewals at a third)")
    parser.add_argument("--heartbeat", type=float, default=2.0)
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    reps = []
    for _ in range(args.reps):
        reps.append(measure(args))
        print(reps[-1], file=sys.stderr, flush=True)
    emit({"bench": "liveness", "sync_always": True, "agents": args.agents, "slots": args.slots,
          "runs_in_flight": args.agents * args.slots, "run_seconds": args.seconds, "window_s": args.window,
          "run_lease_ttl": args.ttl, "heartbeat_s": args.heartbeat, "reps": args.reps,
          "writes_per_s": {p: summary([r["writes_per_s"][p] for r in reps]) for p in [*PURPOSES, "all"]},
          "lease_writes_per_run_per_s": summary([r["lease_writes_per_run_per_s"] for r in reps]),
          "in_flight_at_end": [r["in_flight_at_end"] for r in reps],
          "lost_in_window": sum(r["lost_in_window"] for r in reps),
          "date": time.strftime("%Y-%m-%d", time.gmtime())})
    os._exit(0)  # the fleet's threads: leave without waiting on them


if __name__ == "__main__":
    main()

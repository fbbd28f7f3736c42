"""The design's scale scenarios on a virtual fleet (bench/fleet.py), with fsync before ack.

`--scenario dead_hosts`: `--agents` agents with `--slots` slots each run as many long runs (simulated, `--seconds`
each); once every one is running, `--kill` agents are killed at once (SIGKILL: their loops stop, their sockets
shut) and `--freeze` others frozen (SIGSTOP: their loops block) past their lease. Measured from that instant by
the runs watch: when each run they held is re-dispatched (its record at attempt 2); the frozen agents are thawed
once every such run is, and must fence their attempts rather than report them. Checked at the end, when every
run has ended: each run succeeded, exactly one success was reported for it (none ran to success twice), every
other run at attempt 1, and at which attempt the runs of the dead and frozen agents ended (2, unless placement
sent attempt 2 to an agent it did not know dead yet: it forgets one 4 heartbeats after its last). Prints one JSON
line: each repetition and a summary (medians [min-max]); the target is every run re-dispatched within the lease
TTL + 5 s.

The steady day (10,000 agents, 50,000 runs in flight) and midnight (1,000,000 runs at one instant) do not fit one
2-core machine: docs/benchmarks.md, "Scale", says what did and why.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from collections import Counter
from typing import Any

import nats

from bench.common import System, emit, percentile, submit_now_jobs, summary, system
from bench.fleet import Fleet
from jetcron.config import Settings
from jetcron.core.models import Run
from jetcron.core.sim import SimExecution
from jetcron.sdk.client import Client
from jetcron.wire import subjects as s
from jetcron.wire.codec import decode
from jetcron.wire.messages import RunFinished

PREFIX = "dh"


class Watch:
    """Every run record of this scenario as the runs watch delivers it, with when (monotonic) each run was first
    seen placed again (assigned, running or ended at attempt 2 or later)."""

    def __init__(self) -> None:
        self.runs: dict[str, Run] = {}
        self.redispatched_at: dict[str, float] = {}
        self.changed = asyncio.Event()

    async def follow(self, jc: System, stop: asyncio.Event) -> None:
        nc = await nats.connect(jc.url, **jc.identity.options())
        try:
            kv = await nc.jetstream().key_value(s.BUCKET_RUNS)
            watcher = await kv.watch(">")
            async for entry in watcher:
                if stop.is_set():
                    break
                if entry is None or entry.value is None or not entry.key.startswith(PREFIX):
                    continue
                run = decode(entry.value, Run)
                self.runs[entry.key] = run
                placed = run.state.value in ("assigned", "running") or run.state.terminal
                if run.attempt >= 2 and placed and entry.key not in self.redispatched_at:
                    self.redispatched_at[entry.key] = time.monotonic()
            await watcher.stop()
        finally:
            await nc.close()

    def count(self, state: str) -> int:
        return sum(1 for r in self.runs.values() if r.state == state)


async def _reports(jc: System) -> Counter[str]:
    """Successes reported per run, every report stored from the stream's start."""
    nc = await nats.connect(jc.url, **jc.identity.options())
    found: Counter[str] = Counter()
    try:
        sub = await nc.jetstream().subscribe(s.event_subject("finished", ">"), ordered_consumer=True)
        while True:
            try:
                msg = await sub.next_msg(timeout=3)
            except nats.errors.TimeoutError:
                break
            event = decode(msg.data, RunFinished)
            if event.run_id.startswith(PREFIX) and event.outcome == "succeeded":
                found[event.run_id] += 1
        await sub.unsubscribe()
    finally:
        await nc.close()
    return found


async def _wait(what: str, check: Any, timeout: float) -> float:
    started = time.monotonic()
    while not check():
        if time.monotonic() - started > timeout:
            raise TimeoutError(f"{what}: not within {timeout}s")
        await asyncio.sleep(0.1)
    return time.monotonic() - started


async def dead_hosts(jc: System, fleet: Fleet, args: argparse.Namespace) -> dict[str, Any]:
    runs = args.agents * args.slots
    watch, stop = Watch(), asyncio.Event()
    following = asyncio.create_task(watch.follow(jc, stop))
    client = await Client.connect(jc.url, timeout=60, identity=jc.identity)
    try:
        await submit_now_jobs(client, PREFIX, runs, ["true"], concurrency=32)
        await _wait("every run running", lambda: watch.count("running") == runs, args.seconds / 2)
        ids = list(fleet.agents)
        killed, frozen = ids[:args.kill], ids[args.kill:args.kill + args.freeze]
        held = {run_id for run_id, run in watch.runs.items() if run.agent in {*killed, *frozen}}
        lost_at = time.monotonic()
        for agent_id in killed:
            fleet.kill(agent_id)
        for agent_id in frozen:
            fleet.freeze(agent_id)
        await _wait("every run of a dead or frozen agent re-dispatched",
                    lambda: held <= set(watch.redispatched_at), args.ttl + 60)
        delays = [watch.redispatched_at[r] - lost_at for r in held]
        for agent_id in frozen:
            fleet.thaw(agent_id)
        await _wait("every run ended", lambda: sum(1 for r in watch.runs.values() if r.state.terminal) == runs,
                    args.seconds + 120)
        await asyncio.sleep(2)  # a thawed attempt that did report would have done so by now
        successes = await _reports(jc)
    finally:
        stop.set()
        following.cancel()
        await client.close()
    states = Counter(r.state.value for r in watch.runs.values())
    attempts = Counter((r.run_id in held, r.attempt) for r in watch.runs.values())
    held_attempts = Counter(r.attempt for r in watch.runs.values() if r.run_id in held)
    return {
        "runs": runs, "held_by_dead_or_frozen": len(held),
        "redispatch_p50_s": round(percentile(delays, 50), 2), "redispatch_p99_s": round(percentile(delays, 99), 2),
        "redispatch_max_s": round(max(delays), 2), "within_ttl_plus_5": sum(1 for d in delays if d <= args.ttl + 5),
        "states": dict(states),
        "held_at_attempt_2": attempts[(True, 2)], "others_at_attempt_1": attempts[(False, 1)],
        "held_ended_at_attempt": {str(k): v for k, v in sorted(held_attempts.items())},
        "succeeded_once": sum(1 for r in watch.runs if successes[r] == 1),
        "succeeded_twice_or_more": sum(1 for r in watch.runs if successes[r] > 1),
    }


def measure(args: argparse.Namespace) -> dict[str, Any]:
    with system(sync_always=True, services=("api", "trigger", "placement", "run_tracker"),
                JETCRON_RUN_LEASE_TTL=str(args.ttl), JETCRON_HEARTBEAT=str(args.heartbeat)) as jc:
        base = Settings(nats_url=jc.url, nats_monitor_url=jc.server.monitor_url, data_dir=str(jc.base),
                        heartbeat=args.heartbeat, run_lease_ttl=args.ttl, liveness=args.liveness,
                        agent_cpu=float(args.slots), agent_memory_mb=1024 * args.slots)
        fleet = Fleet(base, args.agents, slots=args.slots, sim=SimExecution.parse(f"fixed:{args.seconds}", "0"))
        with open(args.log, "a") as log:
            was, sys.stdout = sys.stdout, log  # the virtual agents' JSON logs (structlog, bound at boot)
            try:
                fleet.start(timeout=max(120.0, args.agents / 5))
                try:
                    return asyncio.run(dead_hosts(jc, fleet, args))
                finally:
                    fleet.stop()
            finally:
                sys.stdout = was


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scenario", default="dead_hosts", choices=["dead_hosts"])
    parser.add_argument("--agents", type=int, default=300)
    parser.add_argument("--slots", type=int, default=5)
    parser.add_argument("--kill", type=int, default=100)
    parser.add_argument("--freeze", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=60.0, help="each simulated run's duration")
    parser.add_argument("--ttl", type=float, default=10.0, help="JETCRON_RUN_LEASE_TTL")
    parser.add_argument("--heartbeat", type=float, default=2.0)
    parser.add_argument("--liveness", default="agent", choices=["agent", "run"])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--log", default=os.path.join(os.environ.get("TMPDIR", "/tmp"), "jetcron-scale.log"))
    args = parser.parse_args()
    reps = []
    for _ in range(args.reps):
        reps.append(measure(args))
        print(reps[-1], file=sys.stderr, flush=True)
    emit({"bench": f"scale_{args.scenario}", "sync_always": True, "agents": args.agents, "slots": args.slots,
          "kill": args.kill, "freeze": args.freeze, "run_seconds": args.seconds, "run_lease_ttl": args.ttl,
          "heartbeat_s": args.heartbeat, "liveness": args.liveness, "reps": reps,
          "redispatch_p99_s": summary([r["redispatch_p99_s"] for r in reps]),
          "redispatch_max_s": summary([r["redispatch_max_s"] for r in reps]),
          "date": time.strftime("%Y-%m-%d", time.gmtime())})
    os._exit(0)  # killed agents' loops hold sockets and tasks never run again: leave without them


if __name__ == "__main__":
    main()

"""Scenario 4: kill -9 of the trigger shard holder, the placement leader, and an agent with a running job."""

from __future__ import annotations

import argparse
import asyncio
import itertools
import time
from datetime import datetime

import nats

from bench import raw_js
from bench.common import System, emit, summary, system
from bench.trigger_common import read_runs_exact
from jetcron.bus import lease as lease_store
from jetcron.sdk.client import Client
from jetcron.wire import subjects as s

SETTINGS = {"JETCRON_RUN_LEASE_TTL": "4", "JETCRON_LEADER_LEASE_TTL": "3", "JETCRON_HEARTBEAT": "0.5",
            "JETCRON_REDRIVE_AFTER": "5", "JETCRON_ASSIGN_STALL": "5"}
TWO_OF_EACH = ("api", "trigger", "placement", "run_tracker")


async def _holder(url: str, key: str) -> str | None:
    nc = await nats.connect(url)
    lease = await lease_store.on_server(nc.jetstream()).read(key)
    await nc.close()
    return lease.value.holder if lease and lease.value.holder else None


def _start_second_replicas(jc: System) -> None:
    for name in ("trigger", "placement"):
        jc.start(f"{name}-b", name, **SETTINGS)
    jc.wait_ready()


async def trigger_kill(jc: System, jobs: int = 40) -> dict[str, float]:
    """Every-second jobs; kill -9 the replica holding shards; worst lateness after the kill, missed, duplicates."""
    client = await Client.connect(jc.url)
    for i in range(jobs):
        await client.call("jobs.create", {"spec": {"name": f"tick{i}", "command": ["true"],
                                                   "schedule": {"kind": "every", "every_seconds": 1},
                                                   "resources": {"cpu": 0.001, "memory_mb": 1}}})
    await asyncio.sleep(4)
    victim = "trigger"  # the first replica holds shards (it started first); the second takes them over
    killed_at = datetime.now().astimezone()
    jc.kill(victim)
    await asyncio.sleep(8)
    for i in range(jobs):
        await client.call("jobs.pause", {"name": f"tick{i}"})
    await client.close()
    runs = await read_runs_exact(jc.url, "tick")
    late = [(r.created_at - r.scheduled_at).total_seconds() for r in runs if r.scheduled_at >= killed_at]
    missed = 0
    by_job: dict[str, list[datetime]] = {}
    for r in runs:
        by_job.setdefault(r.job, []).append(r.scheduled_at)
    for times in by_job.values():
        times.sort()
        missed += sum(round((b - a).total_seconds()) - 1 for a, b in itertools.pairwise(times))
    duplicates = len(runs) - len({(r.job, r.scheduled_at) for r in runs})
    return {"worst_lateness_s": max(late, default=float("nan")), "missed": missed, "duplicates": duplicates}


async def placement_kill(jc: System) -> dict[str, float]:
    """kill -9 the placement leader, then submit: seconds until the standby assigns."""
    leader = await _holder(jc.url, s.PLACEMENT_LEADER_KEY)
    # The leader's replica id is logged by the process that won; find which of ours it is.
    victim = next((n for n in ("placement", "placement-b")
                   if leader and leader in (jc.base / f"{n}.log").read_text()), "placement")
    killed = time.perf_counter()
    jc.kill(victim)
    client = await Client.connect(jc.url)
    await client.call("jobs.create", {"spec": {"name": "afterkill", "command": ["true"]}})
    while True:
        runs = await read_runs_exact(jc.url, "afterkill")
        if runs and runs[0].assigned_at is not None:
            break
        await asyncio.sleep(0.05)
    await client.close()
    return {"to_assignment_s": time.perf_counter() - killed}


async def agent_kill(jc: System) -> dict[str, float]:
    """kill -9 the agent running a job: seconds until attempt 2 is running elsewhere."""
    client = await Client.connect(jc.url)
    await client.call("jobs.create", {"spec": {"name": "longjob", "command": ["sleep", "3"]}})
    while True:
        runs = await read_runs_exact(jc.url, "longjob")
        if runs and runs[0].state == "running":
            break
        await asyncio.sleep(0.05)
    victim = runs[0].agent or "agent-1"
    killed = time.perf_counter()
    jc.kill(victim)
    while True:
        runs = await read_runs_exact(jc.url, "longjob")
        if runs and runs[0].attempt >= 2 and runs[0].started_at is not None:
            break
        await asyncio.sleep(0.05)
    await client.close()
    return {"redispatch_s": time.perf_counter() - killed, "lease_ttl_s": float(SETTINGS["JETCRON_RUN_LEASE_TTL"])}


def _fresh(scenario: object) -> dict[str, float]:
    """Each fault on its own fresh system, so one scenario's aftermath cannot skew the next."""
    with system(sync_always=True, agents=2, sim=False, **SETTINGS) as jc:
        _start_second_replicas(jc)
        result: dict[str, float] = asyncio.run(asyncio.wait_for(scenario(jc), 90))  # type: ignore[operator]
        return {**result, **asyncio.run(raw_js.measure(jc.url))}


def run(reps: int) -> list[dict[str, object]]:
    trig = [_fresh(trigger_kill) for _ in range(reps)]
    place = [_fresh(placement_kill) for _ in range(reps)]
    agent = [_fresh(agent_kill) for _ in range(reps)]
    return [
        {"bench": "failover_trigger", "settings": SETTINGS,
         "worst_lateness_s": summary([t["worst_lateness_s"] for t in trig]),
         "missed": sum(t["missed"] for t in trig), "duplicates": sum(t["duplicates"] for t in trig),
         **raw_js.fields(trig)},
        {"bench": "failover_placement", "to_assignment_s": summary([p["to_assignment_s"] for p in place]),
         **raw_js.fields(place)},
        {"bench": "failover_agent", "redispatch_s": summary([a["redispatch_s"] for a in agent]),
         "target_s": float(SETTINGS["JETCRON_RUN_LEASE_TTL"]) + 2, **raw_js.fields(agent)},
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    for result in run(args.reps):
        emit(result)


if __name__ == "__main__":
    main()

"""End-to-end placement rate on a real nats-server with 1,000 agents.

What runs for real: nats-server (fsync before ack), the placement service (leader) and the run tracker,
each its own process, unchanged. What is simulated, in this bench process: the 1,000 agents. They
heartbeat real AgentInfo records into `jc_agents` (every 2 s, as agents do), and one consumer on
`jc.assign.>` answers every AssignRun as an agent would in sim mode: take the run lease (a real
revision-checked write), then publish RunFinished(succeeded) carrying the start. 1,000 agent
processes would not fit this machine; the server and placement see the same traffic either way.

N runs are recorded (KV create, as the trigger does) and handed to placement (PlaceRun) with one
due time, so placement holds them all and then places them as a herd. Measured:

- placement rate: runs assigned per second, from the moment they become placeable (due - 1 s lead)
  to the server's store time of the last AssignRun (so the fleet's own pace does not count);
- end to end: the same start to the run tracker having applied every RunFinished.

Prints one JSON line (median of --reps with min/max) and writes bench/results/placement_e2e.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import nats
from nats.js.api import AckPolicy, ConsumerConfig

from bench import raw_js
from bench.common import summary, system
from jetcron.bus.dispatch import dispatch
from jetcron.bus.lease import Leases
from jetcron.core.ids import run_id
from jetcron.core.models import AgentInfo, JobSpec, Resources, Run, RunState
from jetcron.wire import subjects as s
from jetcron.wire.codec import decode, encode
from jetcron.wire.messages import AssignRun, RunFinished

LEAD = 1.0  # placement assigns this far ahead of due_at
RESULTS = Path(__file__).resolve().parent / "results" / "placement_e2e.json"


def agent_info(i: int, now: datetime) -> AgentInfo:
    return AgentInfo(agent_id=f"sim-{i:04d}", host="bench", cpu=16, memory_mb=65536,
                     labels={"zone": f"z{i % 3}", "leaf": f"leaf-{i // 32}"}, heartbeat_at=now, started_at=now)


async def heartbeats(js: nats.js.JetStreamContext, agents: int, stop: asyncio.Event) -> None:
    kv = await js.key_value(s.BUCKET_AGENTS)
    gate = asyncio.Semaphore(128)

    async def put(i: int) -> None:
        async with gate:
            await kv.put(f"sim-{i:04d}", encode(agent_info(i, datetime.now(UTC))))

    while not stop.is_set():
        started = time.monotonic()
        await asyncio.gather(*(put(i) for i in range(agents)))
        try:
            await asyncio.wait_for(stop.wait(), timeout=max(0.1, 2.0 - (time.monotonic() - started)))
        except TimeoutError:
            pass


async def fleet_consumer(js: nats.js.JetStreamContext, received: list[float], stop: asyncio.Event) -> None:
    """Answer every assignment as a sim agent does: run lease, then one RunFinished carrying the start."""
    await js.add_consumer(s.STREAM_ASSIGN, ConsumerConfig(durable_name="bench_fleet", ack_policy=AckPolicy.EXPLICIT,
                                                          filter_subject=s.ASSIGN_ALL, max_ack_pending=50_000))
    sub = await js.pull_subscribe_bind(durable="bench_fleet", stream=s.STREAM_ASSIGN)
    leases = Leases(js)

    async def handle(msg: nats.aio.msg.Msg) -> None:
        cmd = decode(msg.data, AssignRun)
        received.append(msg.metadata.timestamp.timestamp())  # when the server stored it: placement's pace
        lease = await leases.acquire(s.run_lease_key(cmd.run_id), cmd.agent, 30, attempt=cmd.attempt)
        now = datetime.now(UTC)
        await js.publish(s.event_subject("finished"), encode(RunFinished(
            run_id=cmd.run_id, attempt=cmd.attempt, token=lease.token if lease else 0, agent=cmd.agent,
            outcome="succeeded", exit_code=0, at=now, started_at=now)),
            headers={s.HDR_MSG_ID: s.msg_id(cmd.run_id, cmd.attempt, "finished")})
        await msg.ack()

    while not stop.is_set():
        try:
            msgs = await sub.fetch(256, timeout=0.5)
        except (TimeoutError, nats.errors.TimeoutError):
            continue
        await asyncio.gather(*(handle(m) for m in msgs))


async def submit(js: nats.js.JetStreamContext, runs: int, due: datetime, tag: str) -> None:
    kv = await js.key_value(s.BUCKET_RUNS)
    spec = JobSpec(name=f"e2e{tag}", command=["true"], resources=Resources(cpu=0.5, memory_mb=64))
    gate = asyncio.Semaphore(256)

    async def one(i: int) -> None:
        nominal = due + timedelta(milliseconds=i)
        run = Run(run_id=run_id(spec.name, nominal), job=spec.name, state=RunState.SCHEDULED, scheduled_at=nominal,
                  due_at=due, created_at=datetime.now(UTC), spec=spec)
        async with gate:
            await kv.create(run.run_id, encode(run))
            await dispatch(js, run)

    await asyncio.gather(*(one(i) for i in range(runs)))


async def tracker_done(js: nats.js.JetStreamContext, expected_events: int) -> None:
    while True:
        info = await js.consumer_info(s.STREAM_EVENTS, s.CONSUMER_TRACKER)
        if info.ack_floor.stream_seq >= expected_events:
            return
        await asyncio.sleep(0.1)


async def capacity_agents(js: nats.js.JetStreamContext) -> int:
    kv = await js.key_value(s.BUCKET_PLACEMENT)
    try:
        entry = await kv.get(s.CAPACITY_KEY)
    except Exception:
        return 0
    return int(json.loads(entry.value or b"{}").get("agents", 0))


async def one_rep(url: str, agents: int, runs: int, tag: str) -> dict[str, float]:
    nc = await nats.connect(url)
    js = nc.jetstream(timeout=30)
    stop = asyncio.Event()
    received: list[float] = []
    tasks = [asyncio.create_task(heartbeats(js, agents, stop)),
             asyncio.create_task(fleet_consumer(js, received, stop))]
    while await capacity_agents(js) < agents:  # placement sees the whole fleet
        await asyncio.sleep(0.2)
    # One due time for all, far enough ahead that every run is held by placement before it comes due.
    ahead = 3 + runs / 400
    due = datetime.now(UTC) + timedelta(seconds=ahead)
    started = time.time()
    await submit(js, runs, due, tag)
    submitted = time.time()
    placeable = max(started + ahead - LEAD, submitted)
    while len(received) < runs:
        await asyncio.sleep(0.05)
    placed_s = max(received) - placeable
    await tracker_done(js, runs)  # one RunFinished per run: the events stream's only messages
    done_s = time.time() - placeable
    stop.set()
    await asyncio.gather(*tasks, return_exceptions=True)
    await nc.close()
    return {"submit_s": submitted - started, "placed_s": placed_s, "done_s": done_s,
            "late": float(submitted > started + ahead - LEAD)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--agents", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=5000)
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    reps, raws = [], []
    for rep in range(args.reps):
        with system(sync_always=True, services=("placement", "run_tracker")) as jc:
            raws.append(asyncio.run(raw_js.measure(jc.url)))
            reps.append(asyncio.run(one_rep(jc.url, args.agents, args.runs, str(rep))))
    result = {
        "bench": "placement_e2e", "agents": args.agents, "runs": args.runs, "sync_always": True,
        "what": "real nats-server + placement + run_tracker; 1,000 agents simulated in-process (heartbeats, "
                "run lease, RunFinished)",
        "placed_per_s": summary([args.runs / r["placed_s"] for r in reps]),
        "end_to_end_per_s": summary([args.runs / r["done_s"] for r in reps]),
        "submit_per_s": summary([args.runs / r["submit_s"] for r in reps]),
        "raw_kv_cas_per_s": summary([r["kv_cas_per_s"] for r in raws]),
        "raw_publish_ack_per_s": summary([r["publish_ack_per_s"] for r in raws]),
        "reps_submitted_after_due": sum(int(r["late"]) for r in reps),
    }
    print(json.dumps(result), flush=True)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()

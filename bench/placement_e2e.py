"""End-to-end placement rate on a real nats-server with 1,000 agents.

What runs for real: nats-server (fsync before ack), the placement service (leader) and the run tracker,
each its own process, unchanged. What is simulated, in this bench process: the 1,000 agents. They
heartbeat real AgentInfo records into `jc_agents` (every 2 s, as agents do), and one consumer on
`jc.assign.>` answers every AssignRun as an agent would in sim mode: take the run lease (a real
revision-checked write), then publish RunFinished(succeeded) carrying the start. 1,000 agent
processes would not fit this machine; the server and placement see the same traffic either way.

A backlog of N runs is recorded (KV create, as the trigger does: the record is the hand-off to placement),
all due now, before the placement process starts: it loads its books (1,000 agents, N waiting records),
takes the lease, and places the backlog. Measured, from its "placement leader" log line (books loaded):

- placement rate: runs assigned per second, to the server's store time of the last AssignRun (so the
  fleet's own pace does not count); each assignment is a read, a CAS on the run record and a publish;
- end to end: the same start to the run tracker having applied every RunFinished;
- start to lead: process start to that line (interpreter, connect, loading the books).

Prints one JSON line (median of --reps with min/max); `python -m bench.run --only bench.placement_e2e` keeps it
in bench/results/placement_e2e.json.
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
from bench.common import System, summary, system
from jetcron.bus import lease as lease_store
from jetcron.core.ids import run_id
from jetcron.core.models import AgentInfo, JobSpec, Resources, Run, RunState
from jetcron.wire import subjects as s
from jetcron.wire.codec import decode, encode
from jetcron.wire.messages import AssignRun, RunFinished


def agent_info(i: int, now: datetime) -> AgentInfo:
    return AgentInfo(agent_id=f"sim-{i:04d}", host="bench", cpu=16, memory_mb=65536,
                     labels={"zone": f"z{i % 3}", "leaf": f"leaf-{i // 32}"}, heartbeat_at=now, started_at=now)


async def heartbeats(js: nats.js.JetStreamContext, agents: int, stop: asyncio.Event,
                     registered: asyncio.Event) -> None:
    kv = await js.key_value(s.BUCKET_AGENTS)
    gate = asyncio.Semaphore(128)

    async def put(i: int) -> None:
        async with gate:
            await kv.put(f"sim-{i:04d}", encode(agent_info(i, datetime.now(UTC))))

    while not stop.is_set():
        started = time.monotonic()
        await asyncio.gather(*(put(i) for i in range(agents)))
        registered.set()
        try:
            await asyncio.wait_for(stop.wait(), timeout=max(0.1, 2.0 - (time.monotonic() - started)))
        except TimeoutError:
            pass


async def fleet_consumer(js: nats.js.JetStreamContext, received: list[float], stop: asyncio.Event) -> None:
    """Answer every assignment as a sim agent does: run lease, then one RunFinished carrying the start."""
    await js.add_consumer(s.STREAM_ASSIGN, ConsumerConfig(durable_name="bench_fleet", ack_policy=AckPolicy.EXPLICIT,
                                                          filter_subject=s.ASSIGN_ALL, max_ack_pending=50_000))
    sub = await js.pull_subscribe_bind(durable="bench_fleet", stream=s.STREAM_ASSIGN)
    leases = lease_store.on_server(js)

    async def handle(msg: nats.aio.msg.Msg) -> None:
        cmd = decode(msg.data, AssignRun)
        received.append(msg.metadata.timestamp.timestamp())  # when the server stored it: placement's pace
        lease = await leases.acquire(s.run_lease_key(cmd.run_id), cmd.agent, 30, attempt=cmd.attempt)
        now = datetime.now(UTC)
        await js.publish(s.event_subject("finished", cmd.agent), encode(RunFinished(
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

    await asyncio.gather(*(one(i) for i in range(runs)))


async def tracker_done(js: nats.js.JetStreamContext, expected_events: int) -> None:
    while True:
        info = await js.consumer_info(s.STREAM_EVENTS, s.CONSUMER_TRACKER)
        if info.ack_floor.stream_seq >= expected_events:
            return
        await asyncio.sleep(0.1)


async def leader_at(log: Path, timeout: float = 120.0) -> float:
    """When the placement process logged that it leads (its books loaded, the backlog queued)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for line in log.read_text(errors="replace").splitlines() if log.exists() else []:
            if '"placement leader"' in line:
                return datetime.fromisoformat(json.loads(line)["timestamp"].replace("Z", "+00:00")).timestamp()
        await asyncio.sleep(0.05)
    raise TimeoutError(f"placement did not lead: {log.read_text()[-2000:]}")


async def one_rep(jc: System, agents: int, runs: int, tag: str) -> dict[str, float]:
    nc = await nats.connect(jc.url)
    js = nc.jetstream(timeout=30)
    stop, registered = asyncio.Event(), asyncio.Event()
    received: list[float] = []
    tasks = [asyncio.create_task(heartbeats(js, agents, stop, registered)),
             asyncio.create_task(fleet_consumer(js, received, stop))]
    await registered.wait()
    # The backlog: every run recorded and handed to placement, due now, before placement starts.
    started = time.time()
    await submit(js, runs, datetime.now(UTC), tag)
    submitted = time.time()
    launched = time.time()
    jc.start("placement", "placement")
    led = await leader_at(jc.base / "placement.log")
    while len(received) < runs:
        await asyncio.sleep(0.05)
    placed_s = max(received) - led
    await tracker_done(js, runs)  # one RunFinished per run: the events stream's only messages
    done_s = time.time() - led
    stop.set()
    await asyncio.gather(*tasks, return_exceptions=True)
    await nc.close()
    return {"submit_s": submitted - started, "start_to_lead_s": led - launched, "placed_s": placed_s,
            "done_s": done_s}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--agents", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=5000)
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    reps, raws = [], []
    for rep in range(args.reps):
        with system(sync_always=True, services=("run_tracker",)) as jc:
            raws.append(asyncio.run(raw_js.measure(jc.url)))
            reps.append(asyncio.run(one_rep(jc, args.agents, args.runs, str(rep))))
    result = {
        "bench": "placement_e2e", "agents": args.agents, "runs": args.runs, "fsync_before_ack": True,
        "what": "real nats-server + placement + run_tracker; 1,000 agents simulated in-process (heartbeats, "
                "run lease, RunFinished)",
        "placed_per_s": summary([args.runs / r["placed_s"] for r in reps]),
        "end_to_end_per_s": summary([args.runs / r["done_s"] for r in reps]),
        "submit_per_s": summary([args.runs / r["submit_s"] for r in reps]),
        "start_to_lead_s": summary([r["start_to_lead_s"] for r in reps]),
        **raw_js.fields(raws),
    }
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()

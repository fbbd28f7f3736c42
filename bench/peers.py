"""Ahead of the peers, in one window: jetcron beside Celery with Redis and beside a bare JetStream pipeline.

Each repetition measures, one after the other on this machine:

- **jetcron**: `bench.throughput`'s sim run (2 sim agents; `now` jobs through the API until every run's record is
  `succeeded`), with fsync before every ack (`always`) and with the server's default sync.
- **A bare JetStream pipeline** of the same four hops with no scheduling logic: a trigger (this process) writes a
  run's record and publishes it as due; a placement process turns each due message into an assignment, an agent
  process each assignment into a finish report, a tracker process each report into the record's terminal write.
  Five acknowledged writes and three acks per run, each of jetcron's mean size for that write (`bench.floor`), no
  revision check, lease, retry, decision or decode; work-queue streams and durable pull consumers as jetcron's.
  The same server and sync setting as jetcron's.
- **Celery** with a Redis broker (Debian's `redis-server`, no persistence: `--save '' --appendonly no`), the
  prefork pool of 2 (the machine's cores), no result backend: no-op tasks (`bench/peers_celery.py`) enqueued
  first, then drained; the rate is the tasks between the first and the last to run over that time.

- **jetcron's shape with no logic** (`bench.shape_floor`'s pipeline): jetcron's four writes on its own buckets, each
  made by the process that makes it in jetcron and learnt as jetcron learns it (KV watches, direct core requests),
  at both sync settings: what the design allows against Celery before any service decides anything.

The ratios are taken within a repetition: jetcron at `always` over Celery and over the bare pipeline at `always`,
jetcron at default sync over Celery and over the bare pipeline at default sync, and the shape over Celery.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nats
import redis
from nats.js import JetStreamContext
from nats.js.api import ConsumerConfig, RetentionPolicy, StorageType, StreamConfig

from bench.common import emit, stage_processes, summary, system
from bench.floor import SIZES
from bench.shape_floor import shape_rate
from bench.throughput import run as jetcron_run
from bench.throughput import variants
from jetcron.bus.server import free_port

ROOT = Path(__file__).resolve().parent.parent
IN_FLIGHT = 256
"""Runs the bare trigger has in flight, and each stage's fetch batch (as jetcron's submitters and consumers)."""
# stage: (stream it consumes, subject, what it writes next and how large)
STAGES = {
    "placement": ("PEER_DUE", "peer.due", "peer.assign.agent-1", SIZES["assign"]),
    "agent": ("PEER_ASSIGN", "peer.assign.agent-1", "peer.finished", SIZES["event"]),
    "tracker": ("PEER_EVENTS", "peer.finished", "peer.record.{run}", SIZES["run"]),
}
STREAMS = {"PEER_RECORDS": ("peer.record.>", RetentionPolicy.LIMITS),
           "PEER_DUE": ("peer.due", RetentionPolicy.WORK_QUEUE),
           "PEER_ASSIGN": ("peer.assign.>", RetentionPolicy.WORK_QUEUE),
           "PEER_EVENTS": ("peer.finished", RetentionPolicy.WORK_QUEUE)}
DONE = "peer.done"
"""Core subject the tracker stage tells the trigger on once it has written every run's terminal record."""


# --- the bare pipeline ------------------------------------------------------------------------------------------

async def _topology(js: JetStreamContext) -> None:
    for name, (subject, retention) in STREAMS.items():
        await js.add_stream(StreamConfig(name=name, subjects=[subject], retention=retention,
                                         storage=StorageType.FILE))
    for stage, (stream, subject, _, _) in STAGES.items():
        await js.add_consumer(stream, ConsumerConfig(durable_name=stage, filter_subject=subject, ack_wait=30,
                                                     max_ack_pending=IN_FLIGHT * 4))


async def stage(url: str, name: str, runs: int) -> None:
    """One hop of the bare pipeline, as its own process: fetch, write the next message (acknowledged), ack."""
    stream, _, next_subject, size = STAGES[name]
    nc = await nats.connect(url)
    js = nc.jetstream(timeout=30)
    sub = await js.pull_subscribe_bind(name, stream)
    body = b"x" * size
    print("ready", flush=True)

    async def one(msg: nats.aio.msg.Msg) -> None:
        run = (msg.headers or {})["R"]
        await js.publish(next_subject.format(run=run), body, headers={"R": run})
        await msg.ack()

    handled = 0
    while handled < runs:
        try:
            msgs = await sub.fetch(IN_FLIGHT, timeout=1)
        except TimeoutError:  # nats-py's own, or asyncio's when the wait ran out before its last pull
            continue
        await asyncio.gather(*(one(m) for m in msgs))
        handled += len(msgs)
    if name == "tracker":
        await nc.publish(DONE, b"")
        await nc.flush()
    await nc.close()


async def _trigger(url: str, runs: int, tag: str) -> float:
    """Write each run's record and publish it due, IN_FLIGHT runs at once; seconds until the tracker stage says
    every run's terminal record is written."""
    nc = await nats.connect(url)
    js = nc.jetstream(timeout=30)
    finished = asyncio.Event()

    async def done(_: nats.aio.msg.Msg) -> None:
        finished.set()

    await nc.subscribe(DONE, cb=done)
    await nc.flush()
    record, due = b"x" * SIZES["run"], b"x" * SIZES["place"]
    queue = iter(range(runs))

    async def worker() -> None:
        for n in queue:
            run = f"{tag}{n}"
            await js.publish(f"peer.record.{run}", record, headers={"R": run})
            await js.publish("peer.due", due, headers={"R": run})

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(IN_FLIGHT)))
    await asyncio.wait_for(finished.wait(), timeout=max(60.0, runs / 50))
    elapsed = time.perf_counter() - start
    await nc.close()
    return elapsed


def bare_pipeline(runs: int, sync_always: bool, tag: str) -> float:
    """Runs/s through the bare pipeline on a fresh server."""
    with system(sync_always=sync_always, services=()) as jc:
        async def setup() -> None:
            nc = await nats.connect(jc.url)
            await _topology(nc.jetstream(timeout=30))
            await nc.close()

        asyncio.run(setup())
        with stage_processes("bench.peers", list(STAGES), jc.url, runs) as procs:
            elapsed = asyncio.run(_trigger(jc.url, runs, tag))
            for proc in procs:
                if proc.wait(timeout=60) != 0:
                    raise RuntimeError(f"a bare pipeline stage exited with {proc.returncode}")
    return runs / elapsed


# --- Celery -----------------------------------------------------------------------------------------------------

def _redis_binary() -> str:
    found = shutil.which("redis-server")
    if found is None:
        raise SystemExit("bench.peers: redis-server not found; `make bench-peers` installs Debian's redis-server")
    return found


def celery_drain(tasks: int) -> float:
    """Tasks/s a prefork pool of 2 drains from a Redis broker holding `tasks` no-op tasks."""
    from bench import peers_celery as pc

    port = free_port()
    url = f"redis://127.0.0.1:{port}/0"
    env = {**os.environ, "PEERS_BROKER": url}
    with tempfile.TemporaryDirectory(prefix="jetcron-peers-") as tmp:
        server = subprocess.Popen([_redis_binary(), "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                                   "--appendonly", "no", "--dir", tmp], stdout=subprocess.DEVNULL)
        worker: subprocess.Popen[bytes] | None = None
        try:
            client = redis.Redis.from_url(url)
            deadline = time.monotonic() + 30
            while True:
                try:
                    client.ping()
                    break
                except redis.ConnectionError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.05)
            subprocess.run([sys.executable, "-m", "bench.peers_celery", "--enqueue", str(tasks)], cwd=ROOT, env=env,
                           check=True)
            worker = subprocess.Popen([sys.executable, "-m", "celery", "-A", "bench.peers_celery", "worker",
                                       "--pool", "prefork", "--concurrency", "2", "--loglevel", "WARNING",
                                       "--without-heartbeat", "--without-mingle", "--without-gossip"],
                                      cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            deadline = time.monotonic() + max(120.0, tasks / 50)
            while client.get(pc.LAST) is None:
                if worker.poll() is not None:
                    raise RuntimeError(f"the celery worker exited with {worker.returncode}")
                if time.monotonic() > deadline:
                    raise TimeoutError(f"celery drained {client.get(pc.DONE)} of {tasks} tasks")
                time.sleep(0.05)
            first, last = float(client.get(pc.FIRST) or 0), float(client.get(pc.LAST) or 0)
            assert int(client.get(pc.DONE) or 0) == tasks
        finally:
            for proc in (worker, server):
                if proc is not None and proc.poll() is None:
                    proc.terminate()
                    try:
                        proc.wait(timeout=15)
                    except subprocess.TimeoutExpired:
                        proc.kill()
                        proc.wait()
    return (tasks - 1) / (last - first)


# --- the window -------------------------------------------------------------------------------------------------

def run(runs: int, tasks: int, reps: int) -> dict[str, object]:
    got: dict[str, list[float]] = {k: [] for k in ("jetcron_always", "jetcron_default", "bare_always", "bare_default",
                                                   "shape_always", "shape_default", "celery")}
    for rep in range(reps):
        for sync in ("always", "default"):
            (result,) = jetcron_run("sim", runs, 1, sync == "always", variants("sim", {}))
            got[f"jetcron_{sync}"].append(float(result["runs_per_s"]["median"]))  # type: ignore[index]
            got[f"bare_{sync}"].append(bare_pipeline(runs, sync == "always", f"p{rep}{sync[0]}"))
            got[f"shape_{sync}"].append(shape_rate(runs, sync == "always", f"s{rep}{sync[0]}"))
        got["celery"].append(celery_drain(tasks))

    def ratio(a: str, b: str) -> dict[str, float]:
        return summary([x / y for x, y in zip(got[a], got[b], strict=True)])

    return {
        "bench": "peers", "runs": runs, "celery_tasks": tasks, "reps": reps,
        "jetcron_always_runs_per_s": summary(got["jetcron_always"]),
        "jetcron_default_runs_per_s": summary(got["jetcron_default"]),
        "bare_always_runs_per_s": summary(got["bare_always"]), "bare_default_runs_per_s": summary(got["bare_default"]),
        "shape_always_runs_per_s": summary(got["shape_always"]),
        "shape_default_runs_per_s": summary(got["shape_default"]),
        "celery_tasks_per_s": summary(got["celery"]),
        "shape_always_over_celery": ratio("shape_always", "celery"),
        "shape_default_over_celery": ratio("shape_default", "celery"),
        "jetcron_always_over_shape_always": ratio("jetcron_always", "shape_always"),
        "jetcron_always_over_celery": ratio("jetcron_always", "celery"),
        "jetcron_always_over_bare_always": ratio("jetcron_always", "bare_always"),
        "jetcron_default_over_celery": ratio("jetcron_default", "celery"),
        "jetcron_default_over_bare_default": ratio("jetcron_default", "bare_default"),
        "what": "runs/s of jetcron (2 sim agents), of a bare 4-process JetStream pipeline of the same hops (5 writes "
                "and 3 acks per run, no logic) at always and default sync, and Celery's drain rate (Redis broker "
                "without persistence, prefork x2, no-op tasks), each repetition all in one window; the ratios per "
                "repetition. shape: bench.shape_floor's pipeline, jetcron's four writes made by five processes as "
                "its services make them, with no logic",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5_000, help="runs through jetcron and the bare pipeline")
    parser.add_argument("--tasks", type=int, default=20_000, help="no-op tasks Celery drains")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--stage", choices=list(STAGES), help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.stage:
        asyncio.run(stage(args.url, args.stage, args.runs))
        return
    emit(run(args.runs, args.tasks, args.reps))


if __name__ == "__main__":
    main()

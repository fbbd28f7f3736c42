"""What the design's shape costs on top of the four writes: the built floor passed between separate processes.

`bench.floor`'s `built` chain makes the four acknowledged writes of a run due now (the job, the fire gate, the
`assigned` CAS, the `succeeded` CAS) from one process, with nothing delivered to anyone. jetcron's design fixes
more than the writes: separate api, trigger, placement, agent and tracker services talking over JetStream
subjects, each learning of its work from the previous one's write or request. This bench makes the same four writes
on jetcron's own buckets, each from the process that makes it in jetcron and learnt the way jetcron learns it, with
no logic at all (no decode, no decision, no lease, no retry):

- the driver (this process, as the api) creates each job's record, `IN_FLIGHT` at a time;
- a trigger process watches the jobs bucket (an ordered consumer, as a KV watch) and creates each run's record;
- a placement process watches the runs bucket (every revision, as jetcron's placement does) and on a run's first
  writes its `assigned` CAS, then hands the run to the agent by a core request;
- an agent process answers at once, then hands the finish report to the tracker by a core request;
- a tracker process writes the `succeeded` CAS, answers, and tells the driver (a core message per run).

Each repetition measures, one after the other in one window: this pipeline (a burst of `--runs`, `IN_FLIGHT` in
flight, then `--idle-runs` one at a time, each from the job's write to the tracker's word), the built chain from
one process (the same burst, then alone), v2's four writes from one process (`bench.floor`'s `chain_v2`: the
target's floor), and jetcron itself (`bench.throughput`'s sim run, 2 sim agents, the same runs). The ratios
within a repetition say how much of the floor the shape alone keeps, and how much of that jetcron reaches; the idle
figures, what the shape adds to an idle run before its child (`bench.child_floor`).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import NamedTuple

import nats
from nats.aio.msg import Msg

from bench.common import emit, percentile, stage_processes, stored_messages, summary, system
from bench.floor import SIZES, _kv, chain_built, chain_v2, idle, throughput, topology
from bench.throughput import run as jetcron_run
from bench.throughput import variants
from jetcron.bus.acks import publish_acked
from jetcron.wire import subjects as s

IN_FLIGHT = 256
"""Runs in flight, from the driver and in the one-process chain alike (jetcron's submitters keep as many)."""
AGENT, TRACKER, DONE = "floor.shape.agent", "floor.shape.tracker", "floor.shape.done"
"""Core subjects: the direct hand-offs (a request each) and the tracker's word that every run is written."""
STAGES = ("trigger", "placement", "agent", "tracker")
CREATE = {s.HDR_EXPECTED_LAST_SUBJECT_SEQ: "0"}


def _cas(revision: int) -> dict[str, str]:
    return {s.HDR_EXPECTED_LAST_SUBJECT_SEQ: str(revision)}


async def stage(url: str, name: str, runs: int) -> None:
    """One service's part, as its own process, until the last run is through."""
    nc = await nats.connect(url)
    js = nc.jetstream(timeout=30)
    finished = asyncio.Event()
    tasks: set[asyncio.Task[None]] = set()
    handled = 0

    def handler(work: Callable[[Msg], Awaitable[None]]) -> Callable[[Msg], Awaitable[None]]:
        """A subscription's callback that starts the work and returns, so the next message is not held behind it."""
        async def callback(msg: Msg) -> None:
            task = asyncio.create_task(work(msg))
            tasks.add(task)
            task.add_done_callback(tasks.discard)

        return callback

    async def fire(msg: Msg) -> None:  # trigger: the job's record seen, the run's created
        nonlocal handled
        run = "r" + msg.subject.rsplit(".", 1)[1]  # the run's key from its job's
        await publish_acked(js, _kv(s.BUCKET_RUNS, run), b"r" * SIZES["run"], CREATE)
        handled += 1
        if handled == runs:
            finished.set()

    async def place(msg: Msg) -> None:  # placement: a run's first revision seen, assigned and handed over
        nonlocal handled
        if msg.data[:1] != b"r":  # a later revision (assigned, succeeded) passes by, as in jetcron
            return
        run = msg.subject.rsplit(".", 1)[1]
        revision = await publish_acked(js, msg.subject, b"a" * SIZES["run"], _cas(msg.metadata.sequence.stream))
        await nc.request(AGENT, f"{run} {revision}".encode(), timeout=30)
        handled += 1
        if handled == runs:
            finished.set()

    async def start(msg: Msg) -> None:  # agent: the hand-off answered, the run's end reported
        nonlocal handled
        await msg.respond(b"1")
        await nc.request(TRACKER, msg.data, timeout=30)
        handled += 1
        if handled == runs:
            finished.set()

    async def end(msg: Msg) -> None:  # tracker: the terminal CAS, then the answer
        nonlocal handled
        run, revision = msg.data.decode().split()
        await publish_acked(js, _kv(s.BUCKET_RUNS, run), b"s" * SIZES["run"], _cas(int(revision)))
        await msg.respond(b"1")
        await nc.publish(DONE, run.encode())
        handled += 1
        if handled == runs:
            finished.set()

    if name == "trigger":
        await js.subscribe(_kv(s.BUCKET_JOBS, ">"), ordered_consumer=True, cb=handler(fire))
    elif name == "placement":
        await js.subscribe(_kv(s.BUCKET_RUNS, ">"), ordered_consumer=True, cb=handler(place))
    else:
        await nc.subscribe(AGENT if name == "agent" else TRACKER, cb=handler(start if name == "agent" else end))
    await nc.flush()
    print("ready", flush=True)
    cpu = time.process_time()
    await finished.wait()
    await nc.flush()
    await nc.close()
    print(f"cpu {time.process_time() - cpu}", flush=True)  # seconds spent on the runs, start-up left out


async def _drive(url: str, runs: int, idle_runs: int, tag: str) -> tuple[float, list[float]]:
    """Create `runs` jobs' records, IN_FLIGHT at once, and wait for every run to be written (seconds); then
    `idle_runs` one at a time (milliseconds each, the job's write to the tracker's word)."""
    nc = await nats.connect(url)
    js = nc.jetstream(timeout=30)
    written: asyncio.Queue[bytes] = asyncio.Queue()

    async def done(msg: Msg) -> None:
        written.put_nowait(msg.data)

    await nc.subscribe(DONE, cb=done)
    await nc.flush()
    queue = iter(range(runs))

    async def worker() -> None:
        for n in queue:
            await publish_acked(js, _kv(s.BUCKET_JOBS, f"{tag}j{n}"), b"j" * SIZES["job"], CREATE)

    async def all_written() -> None:
        for _ in range(runs):
            await written.get()

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(IN_FLIGHT)))
    await asyncio.wait_for(all_written(), timeout=max(60.0, runs / 50))
    elapsed = time.perf_counter() - start
    took = []
    for n in range(idle_runs):
        start = time.perf_counter()
        await publish_acked(js, _kv(s.BUCKET_JOBS, f"{tag}i{n}"), b"j" * SIZES["job"], CREATE)
        if await asyncio.wait_for(written.get(), timeout=30) != f"r{tag}i{n}".encode():
            raise RuntimeError("the shape pipeline wrote another run than the one alone in it")
        took.append((time.perf_counter() - start) * 1000)
    await nc.close()
    return elapsed, took


class Pipeline(NamedTuple):
    rate: float
    """Runs/s of the burst."""
    writes: float
    """Stored writes per run, from the server's counters."""
    idle_ms: list[float]
    cpu_ms: dict[str, float]
    """CPU per run of each process (the driver's as the api's), burst and idle runs together."""


class Window(NamedTuple):
    """One repetition's figures, all on one server."""

    shape: Pipeline
    chain_rate: float
    chain_idle_ms: list[float]
    v2_rate: float


def pipeline(url: str, monitor_url: str, runs: int, idle_runs: int, tag: str) -> Pipeline:
    """The pipeline's figures on a server with jetcron's topology."""
    with stage_processes("bench.shape_floor", STAGES, url, runs + idle_runs) as procs:
        before, driver = stored_messages(monitor_url), time.process_time()
        elapsed, took = asyncio.run(_drive(url, runs, idle_runs, tag))
        cpu_ms = {"driver": (time.process_time() - driver) * 1000 / (runs + idle_runs)}
        writes = (stored_messages(monitor_url) - before) / (runs + idle_runs)
        for name, proc in zip(STAGES, procs, strict=True):
            out, _ = proc.communicate(timeout=60)
            if proc.returncode != 0 or not out.startswith("cpu "):
                raise RuntimeError(f"the shape's {name} exited with {proc.returncode}")
            cpu_ms[name] = float(out.split()[1]) * 1000 / (runs + idle_runs)
    return Pipeline(runs / elapsed, writes, took, cpu_ms)


def shape_rate(runs: int, sync_always: bool, tag: str) -> float:
    """The pipeline's runs/s on a fresh server (`bench.peers` sets it beside Celery)."""
    with system(sync_always=sync_always, services=()) as jc:
        asyncio.run(topology(jc.url))
        return pipeline(jc.url, jc.server.monitor_url, runs, 0, tag).rate


def shape_pipeline(runs: int, idle_runs: int, sync_always: bool, tag: str) -> Window:
    """The pipeline's figures, then the one-process chains' on the same server."""
    with system(sync_always=sync_always, services=()) as jc:
        asyncio.run(topology(jc.url))
        shape = pipeline(jc.url, jc.server.monitor_url, runs, idle_runs, f"{tag}p")
        # after the pipeline, whose watchers would otherwise be handed these chains' records too
        chain_rate, _ = asyncio.run(throughput(jc.url, runs, IN_FLIGHT, f"{tag}c", chain_built))
        chain_took = asyncio.run(idle(jc.url, idle_runs, f"{tag}w", chain_built))
        v2_rate, _ = asyncio.run(throughput(jc.url, runs, IN_FLIGHT, f"{tag}v", chain_v2))
    return Window(shape, chain_rate, chain_took, v2_rate)


def run(runs: int, idle_runs: int, reps: int, sync_always: bool) -> dict[str, object]:
    got: dict[str, list[float]] = {k: [] for k in ("chain", "shape", "writes", "jetcron", "shape_p50", "shape_p99",
                                                   "chain_p50", "v2")}
    cpu: dict[str, list[float]] = {}
    compared = variants("sim", {})
    for rep in range(reps):
        window = shape_pipeline(runs, idle_runs, sync_always, f"s{rep}")
        got["shape"].append(window.shape.rate)
        got["writes"].append(window.shape.writes)
        for name, ms in window.shape.cpu_ms.items():
            cpu.setdefault(name, []).append(ms)
        got["chain"].append(window.chain_rate)
        got["shape_p50"].append(statistics.median(window.shape.idle_ms))
        got["shape_p99"].append(percentile(window.shape.idle_ms, 99))
        got["chain_p50"].append(statistics.median(window.chain_idle_ms))
        got["v2"].append(window.v2_rate)
        result = jetcron_run("sim", runs, 1, sync_always, compared)[0]
        got["jetcron"].append(result["runs_per_s"]["median"])  # type: ignore[index]

    def ratio(a: str, b: str) -> dict[str, float]:
        return summary([x / y for x, y in zip(got[a], got[b], strict=True)])

    return {
        "bench": "shape_floor", "runs": runs, "reps": reps, "in_flight": IN_FLIGHT, "sync_always": sync_always,
        "built_chain_runs_per_s": summary(got["chain"]), "shape_runs_per_s": summary(got["shape"]),
        "shape_writes_per_run": summary(got["writes"]), "jetcron_runs_per_s": summary(got["jetcron"]),
        "shape_over_chain": ratio("shape", "chain"), "jetcron_over_shape": ratio("jetcron", "shape"),
        "jetcron_over_chain": ratio("jetcron", "chain"), "idle_runs": idle_runs,
        "v2_chain_runs_per_s": summary(got["v2"]), "shape_over_v2_chain": ratio("shape", "v2"),
        "jetcron_over_v2_chain": ratio("jetcron", "v2"),
        "shape_idle_p50_ms": summary(got["shape_p50"]), "shape_idle_p99_ms": summary(got["shape_p99"]),
        "built_chain_idle_p50_ms": summary(got["chain_p50"]),
        "shape_cpu_ms_per_run": {name: summary(values) for name, values in cpu.items()},
        "shape_cpu_ms_per_run_stages": summary([sum(cpu[name][i] for name in STAGES) for i in range(reps)]),
        "method": "python -m bench.shape_floor: per repetition, one after the other: the built chain's four writes "
                  "from one process; the same writes made by four processes and a driver as jetcron's services "
                  "make them (KV watches, direct core requests), with no logic; jetcron's sim run (2 sim agents)",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=5_000)
    parser.add_argument("--idle-runs", type=int, default=200, help="runs one at a time after the burst, per rep")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--sync", choices=["always", "default", "both"], default="always")
    parser.add_argument("--stage", choices=STAGES, help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.stage:
        asyncio.run(stage(args.url, args.stage, args.runs))
        return
    for sync in ([True, False] if args.sync == "both" else [args.sync == "always"]):
        emit(run(args.runs, args.idle_runs, args.reps, sync))


if __name__ == "__main__":
    main()

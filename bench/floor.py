"""What the protocol's eight acknowledged writes per run allow on this server, with no service at all.

A run of a `now` job is eight acknowledged writes in series (docs/benchmarks.md, "Why the targets are out of
reach in this shape"): the job, the run record's create (the fire gate), `PlaceRun`, the `assigned` CAS,
`AssignRun`, the run lease (with its Nats-TTL), the finish report and the `succeeded` CAS. This bench makes
exactly those writes, on jetcron's own streams and buckets (`ensure_topology`), from one process through
jetcron's own ack path (`bus/acks`), with nothing else: no consumer reads them, no service decides anything,
no message is delivered to anyone. It is a bound, not a model: every real run costs at least this much.

- **Throughput floor**: `--runs` chains, `--concurrency` of them in flight; runs/s and its ratio to the raw
  publish rate measured beside it (the denominator of the `always` ≥ 15 % and default ≥ 5 % targets,
  docs/benchmarks.md).
- **Idle floor**: one chain at a time; p50/p99 of the eight writes, and of a bare `true` spawned and reaped
  from asyncio (the agent's child, at its cheapest): together the least an idle submit → `succeeded` can take.
- The client's own CPU per chain, to show that the bound is the server's and not this process's.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

import nats
from nats.js import JetStreamContext

from bench import raw_js
from bench.common import emit, percentile, stored_messages, summary, system
from jetcron.bus.acks import publish_acked
from jetcron.bus.topology import ensure_topology
from jetcron.core.models import Priority
from jetcron.wire import subjects as s

# The mean size of each write, headers included, as 300 `now` jobs on a sim agent wrote them (bytes).
SIZES = {"job": 1114, "run": 1436, "place": 383, "assign": 1098, "lease": 240, "event": 339}
LEASE_TTL = "4s"


def _kv(bucket: str, key: str) -> str:
    return f"$KV.{bucket}.{key}"


async def chain(js: JetStreamContext, n: int, tag: str) -> None:
    """The eight writes of one run, each after the previous one's ack, as the services make them."""
    job, run = f"{tag}j{n}", f"{tag}r{n}"
    create = {s.HDR_EXPECTED_LAST_SUBJECT_SEQ: "0"}
    await publish_acked(js, _kv(s.BUCKET_JOBS, job), b"j" * SIZES["job"], create)
    revision = await publish_acked(js, _kv(s.BUCKET_RUNS, run), b"r" * SIZES["run"], create)
    await publish_acked(js, s.place_subject(Priority.NORMAL), b"p" * SIZES["place"], {s.HDR_MSG_ID: f"{run}/1"})
    revision = await publish_acked(js, _kv(s.BUCKET_RUNS, run), b"a" * SIZES["run"],
                                   {s.HDR_EXPECTED_LAST_SUBJECT_SEQ: str(revision)})
    await publish_acked(js, s.assign_subject("floor"), b"A" * SIZES["assign"], {s.HDR_MSG_ID: f"{run}/1"})
    await publish_acked(js, _kv(s.BUCKET_LEASES, run), b"l" * SIZES["lease"], {**create, s.HDR_TTL: LEASE_TTL})
    await publish_acked(js, s.event_subject("finished", "floor"), b"e" * SIZES["event"], {s.HDR_MSG_ID: f"{run}/f"})
    await publish_acked(js, _kv(s.BUCKET_RUNS, run), b"s" * SIZES["run"],
                        {s.HDR_EXPECTED_LAST_SUBJECT_SEQ: str(revision)})


async def topology(url: str) -> None:
    nc = await nats.connect(url)
    await ensure_topology(nc.jetstream(timeout=30))
    await nc.close()


async def throughput(url: str, runs: int, concurrency: int, tag: str) -> tuple[float, float]:
    """(runs/s, client CPU ms per run) with `concurrency` chains in flight."""
    nc = await nats.connect(url)
    js = nc.jetstream(timeout=30)
    queue = iter(range(runs))

    async def worker() -> None:
        for n in queue:
            await chain(js, n, tag)

    cpu, start = time.process_time(), time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    await nc.close()
    return runs / elapsed, cpu / runs * 1000


async def idle(url: str, runs: int, tag: str) -> list[float]:
    """Milliseconds of each chain made alone."""
    nc = await nats.connect(url)
    js = nc.jetstream(timeout=30)
    took = []
    for n in range(runs):
        start = time.perf_counter()
        await chain(js, n, tag)
        took.append((time.perf_counter() - start) * 1000)
    await nc.close()
    return took


async def child(runs: int) -> list[float]:
    """Milliseconds from spawning `true` to having reaped it, one at a time."""
    took = []
    for _ in range(runs):
        start = time.perf_counter()
        proc = await asyncio.create_subprocess_exec("true")
        await proc.wait()
        took.append((time.perf_counter() - start) * 1000)
    return took


def run(runs: int, concurrency: int, idle_runs: int, reps: int, sync_always: bool) -> dict[str, object]:
    rates, cpus, raws, ratios, writes, chain_p50, chain_p99, child_p50, floors = [], [], [], [], [], [], [], [], []
    for rep in range(reps):
        with system(sync_always=sync_always, services=()) as jc:
            raws.append(asyncio.run(raw_js.measure(jc.url)))
            asyncio.run(topology(jc.url))
            before = stored_messages(jc.server.monitor_url)
            rate, cpu = asyncio.run(throughput(jc.url, runs, concurrency, f"t{rep}"))
            writes.append((stored_messages(jc.server.monitor_url) - before) / runs)
            rates.append(rate)
            cpus.append(cpu)
            ratios.append(rate / raws[-1]["publish_ack_per_s"])
            took = asyncio.run(idle(jc.url, idle_runs, f"i{rep}"))
        spawned = asyncio.run(child(idle_runs))
        chain_p50.append(statistics.median(took))
        chain_p99.append(percentile(took, 99))
        child_p50.append(statistics.median(spawned))
        floors.append(chain_p50[-1] + child_p50[-1])
    return {
        "bench": "floor", "runs": runs, "concurrency": concurrency, "idle_runs": idle_runs,
        "sync_always": sync_always, "writes_per_run": summary(writes),
        "floor_runs_per_s": summary(rates), "floor_ratio_to_raw_publish": summary(ratios),
        "client_cpu_ms_per_run": summary(cpus), **raw_js.fields(raws),
        "idle_eight_writes_p50_ms": summary(chain_p50), "idle_eight_writes_p99_ms": summary(chain_p99),
        "idle_true_spawn_to_reaped_p50_ms": summary(child_p50), "idle_floor_p50_ms": summary(floors),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=20_000)
    parser.add_argument("--concurrency", type=int, default=512)
    parser.add_argument("--idle-runs", type=int, default=200)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--sync", choices=["always", "default", "both"], default="both")
    args = parser.parse_args()
    for sync in ([True, False] if args.sync == "both" else [args.sync == "always"]):
        emit(run(args.runs, args.concurrency, args.idle_runs, args.reps, sync))


if __name__ == "__main__":
    main()

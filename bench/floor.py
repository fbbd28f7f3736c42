"""What the protocol's eight acknowledged writes per run allow on this server, with no service at all.

A run of a `now` job is eight acknowledged writes in series (docs/benchmarks-history.md, "Why the targets
were out of reach in v1's shape"): the job, the run record's create (the fire gate), `PlaceRun`, the `assigned` CAS,
`AssignRun`, the run lease (with its Nats-TTL), the finish report and the `succeeded` CAS. This bench makes
exactly those writes, on jetcron's own streams and buckets (`ensure_topology`), from one process through
jetcron's own ack path (`jetcron.bus.acks`), with nothing else: no consumer reads them, no service decides anything,
no message is delivered to anyone. It is a bound, not a model: every real run costs at least this much.

- **Throughput floor**: `--runs` chains, `--concurrency` of them in flight; runs/s and its ratio to the raw
  publish rate measured beside it (the denominator of the `always` ≥ 15 % and default ≥ 5 % targets,
  docs/benchmarks-history.md).
- **Idle floor**: one chain at a time; p50/p99 of the eight writes, and of a bare `true` spawned and reaped
  from asyncio (the agent's child, at its cheapest): together the least an idle submit → `succeeded` can take.
- The client's own CPU per chain, to show that the bound is the server's and not this process's.

Beside v1's eight, the same measures for protocol v2's four (docs/decisions-protocol.md, "Protocol v2's floor"),
in the same system, so the two compare in one window: the job, the run record's create (the fire gate, which
placement reads: no `PlaceRun`), the assignment as a record of its own on a run log (a subject per agent and
run, revision-checked across every agent's subject for that run, its sequence the attempt's fencing token: no
`assigned` CAS and no run lease, liveness being the agent's lease), and the finish report as the terminal write
(checked against that token: no `succeeded` CAS). Each repetition first checks that the server fences a stale
report (an earlier attempt's token) on that log.

And the four writes of the protocol as built now, with the direct hand-offs taking their messages and a run due
now started before its claim (`built_*`): what the services' own work is measured against
(docs/decisions-protocol.md).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable

import nats
import nats.js.errors
from nats.js import JetStreamContext
from nats.js.api import StorageType, StreamConfig

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


async def chain_built(js: JetStreamContext, n: int, tag: str) -> None:
    """The four writes of one run due now as the protocol is built now, when nothing falls back to a stream and
    the run ends within a quarter second (so it writes no claim): the job, the fire gate (which placement reads),
    the `assigned` CAS, the `succeeded` CAS. The assignment and the finish report travel as core requests (the
    direct hand-offs), which store nothing."""
    job, run = f"{tag}j{n}", f"{tag}r{n}"
    create = {s.HDR_EXPECTED_LAST_SUBJECT_SEQ: "0"}
    await publish_acked(js, _kv(s.BUCKET_JOBS, job), b"j" * SIZES["job"], create)
    revision = await publish_acked(js, _kv(s.BUCKET_RUNS, run), b"r" * SIZES["run"], create)
    revision = await publish_acked(js, _kv(s.BUCKET_RUNS, run), b"a" * SIZES["run"],
                                   {s.HDR_EXPECTED_LAST_SUBJECT_SEQ: str(revision)})
    await publish_acked(js, _kv(s.BUCKET_RUNS, run), b"s" * SIZES["run"],
                        {s.HDR_EXPECTED_LAST_SUBJECT_SEQ: str(revision)})


RUN_LOG = "JC_V2_RUNLOG"
"""v2's run log: a bench-only stream (protocol v2 is measured here before it is built)."""


def _log_subject(agent: str, run: str, entry: str) -> str:
    """An entry of a run's log: its assignment to `agent` (what that agent's consumer, `jc.v2.run.<agent>.*.assign`,
    delivers) or that agent's report of its end."""
    return f"jc.v2.run.{agent}.{run}.{entry}"


def _fenced(run: str, token: int) -> dict[str, str]:
    """Written only if the run's last entry, on any agent's subject, is `token` (0: the run has none yet)."""
    return {s.HDR_EXPECTED_LAST_SUBJECT_SEQ: str(token),
            s.HDR_EXPECTED_LAST_SUBJECT_SEQ_SUBJECT: f"jc.v2.run.*.{run}.*"}


async def chain_v2(js: JetStreamContext, n: int, tag: str, fold: bool = False) -> None:
    """The four writes of one run in protocol v2, each after the previous one's ack; with `fold`, a fifth: the
    run record brought up to its end (revision-checked), which listings by state would read."""
    job, run = f"{tag}j{n}", f"{tag}r{n}"
    create = {s.HDR_EXPECTED_LAST_SUBJECT_SEQ: "0"}
    await publish_acked(js, _kv(s.BUCKET_JOBS, job), b"j" * SIZES["job"], create)
    revision = await publish_acked(js, _kv(s.BUCKET_RUNS, run), b"r" * SIZES["run"], create)
    token = await publish_acked(js, _log_subject("floor", run, "assign"), b"A" * SIZES["assign"], _fenced(run, 0))
    await publish_acked(js, _log_subject("floor", run, "end"), b"e" * SIZES["event"], _fenced(run, token))
    if fold:
        await publish_acked(js, _kv(s.BUCKET_RUNS, run), b"s" * SIZES["run"],
                            {s.HDR_EXPECTED_LAST_SUBJECT_SEQ: str(revision)})


async def chain_v2_folded(js: JetStreamContext, n: int, tag: str) -> None:
    await chain_v2(js, n, tag, fold=True)


async def stale_report_refused(js: JetStreamContext, tag: str) -> bool:
    """A run assigned to agent a, then again (a new attempt) to agent b: a's report, with its own attempt's
    token, is refused, and b's is written."""
    run = f"{tag}stale"
    first = await publish_acked(js, _log_subject("a", run, "assign"), b"A", _fenced(run, 0))
    second = await publish_acked(js, _log_subject("b", run, "assign"), b"A", _fenced(run, first))
    try:
        await publish_acked(js, _log_subject("a", run, "end"), b"e", _fenced(run, first))
    except nats.js.errors.APIError:
        await publish_acked(js, _log_subject("b", run, "end"), b"e", _fenced(run, second))
        return True
    return False


async def topology(url: str) -> None:
    nc = await nats.connect(url)
    js = nc.jetstream(timeout=30)
    await ensure_topology(js)
    await js.add_stream(StreamConfig(name=RUN_LOG, subjects=["jc.v2.run.>"], storage=StorageType.FILE))
    await nc.close()


Chain = Callable[[JetStreamContext, int, str], Awaitable[None]]


async def throughput(url: str, runs: int, concurrency: int, tag: str, make: Chain = chain) -> tuple[float, float]:
    """(runs/s, client CPU ms per run) with `concurrency` chains in flight."""
    nc = await nats.connect(url)
    js = nc.jetstream(timeout=30)
    queue = iter(range(runs))

    async def worker() -> None:
        for n in queue:
            await make(js, n, tag)

    cpu, start = time.process_time(), time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    await nc.close()
    return runs / elapsed, cpu / runs * 1000


async def idle(url: str, runs: int, tag: str, make: Chain = chain) -> list[float]:
    """Milliseconds of each chain made alone."""
    nc = await nats.connect(url)
    js = nc.jetstream(timeout=30)
    took = []
    for n in range(runs):
        start = time.perf_counter()
        await make(js, n, tag)
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


async def _stale_report_refused(url: str, tag: str) -> bool:
    nc = await nats.connect(url)
    try:
        return await stale_report_refused(nc.jetstream(timeout=30), tag)
    finally:
        await nc.close()


def run(runs: int, concurrency: int, idle_runs: int, reps: int, sync_always: bool) -> dict[str, object]:
    rates, cpus, raws, ratios, writes, chain_p50, chain_p99, child_p50, floors = [], [], [], [], [], [], [], [], []
    v2: dict[str, list[float]] = {k: [] for k in ("rates", "cpus", "ratios", "over_v1", "writes", "p50", "p99",
                                                  "folded_rates", "folded_over_v1")}
    built: dict[str, list[float]] = {k: [] for k in ("rates", "over_v1", "writes", "p50", "p99")}
    for rep in range(reps):
        with system(sync_always=sync_always, services=()) as jc:
            raws.append(asyncio.run(raw_js.measure(jc.url)))
            asyncio.run(topology(jc.url))
            assert asyncio.run(_stale_report_refused(jc.url, f"f{rep}")), "the server wrote a stale v2 report"
            before = stored_messages(jc.server.monitor_url)
            rate, cpu = asyncio.run(throughput(jc.url, runs, concurrency, f"t{rep}"))
            writes.append((stored_messages(jc.server.monitor_url) - before) / runs)
            rates.append(rate)
            cpus.append(cpu)
            ratios.append(rate / raws[-1]["publish_ack_per_s"])
            before = stored_messages(jc.server.monitor_url)
            rate2, cpu2 = asyncio.run(throughput(jc.url, runs, concurrency, f"v{rep}", chain_v2))
            v2["writes"].append((stored_messages(jc.server.monitor_url) - before) / runs)
            v2["rates"].append(rate2)
            v2["cpus"].append(cpu2)
            v2["ratios"].append(rate2 / raws[-1]["publish_ack_per_s"])
            v2["over_v1"].append(rate2 / rate)
            before = stored_messages(jc.server.monitor_url)
            rate4, _ = asyncio.run(throughput(jc.url, runs, concurrency, f"b{rep}", chain_built))
            built["writes"].append((stored_messages(jc.server.monitor_url) - before) / runs)
            built["rates"].append(rate4)
            built["over_v1"].append(rate4 / rate)
            rate3, _ = asyncio.run(throughput(jc.url, runs, concurrency, f"x{rep}", chain_v2_folded))
            v2["folded_rates"].append(rate3)
            v2["folded_over_v1"].append(rate3 / rate)
            took = asyncio.run(idle(jc.url, idle_runs, f"i{rep}"))
            took2 = asyncio.run(idle(jc.url, idle_runs, f"w{rep}", chain_v2))
            v2["p50"].append(statistics.median(took2))
            v2["p99"].append(percentile(took2, 99))
            took4 = asyncio.run(idle(jc.url, idle_runs, f"c{rep}", chain_built))
            built["p50"].append(statistics.median(took4))
            built["p99"].append(percentile(took4, 99))
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
        "v2_writes_per_run": summary(v2["writes"]), "v2_floor_runs_per_s": summary(v2["rates"]),
        "v2_floor_ratio_to_raw_publish": summary(v2["ratios"]), "v2_over_v1_floor": summary(v2["over_v1"]),
        "v2_client_cpu_ms_per_run": summary(v2["cpus"]), "v2_idle_four_writes_p50_ms": summary(v2["p50"]),
        "v2_idle_four_writes_p99_ms": summary(v2["p99"]), "v2_stale_report_refused": True,
        "v2_folded_floor_runs_per_s": summary(v2["folded_rates"]),
        "v2_folded_over_v1_floor": summary(v2["folded_over_v1"]),
        "built_writes_per_run": summary(built["writes"]), "built_floor_runs_per_s": summary(built["rates"]),
        "built_over_v1_floor": summary(built["over_v1"]), "built_idle_writes_p50_ms": summary(built["p50"]),
        "built_idle_writes_p99_ms": summary(built["p99"]),
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

"""What counting every finished run per minute costs (jc_finished: jetcron.core.lifecycle.finished,
jetcron_services.run_tracker.finished, jetcron.bus.finished), beside what the alternatives would cost. One embedded
server with fsync before every ack (as jetcron runs it), no services: each part is the code the tracker and the api run,
on the real bucket.

- **tally**: the tracker's in-memory count of one terminal record from its runs watch (CPU per run);
- **writes**: `--rate` runs finishing per second across `--tenants` tenants for `--seconds` seconds (the clock
  moved by hand, one flush per second as the tracker leader does): records written per second and per run, and
  how long one flush takes;
- **read**: the bucket holding `--days` days of minutes for the cluster and every tenant, the last hour read as
  the admin and as a tenant (`runs.finished`'s read, two requests): its latency and the records it reads;
- **storage**: stored bytes per minute record;
- **per run**: what one more acknowledged write per finished run would cost instead (a JetStream counter
  increment, `Nats-Incr`, on an `allow_msg_counter` stream; or one compact message per run), as a rate on this
  server beside plain publishes; and reading one message per run back for an hour at `--rate` (`--per-run-read`
  messages read by time, the hour extrapolated).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import nats
from nats.js import JetStreamContext
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy, StreamConfig

from bench.common import emit, percentile
from jetcron.bus.finished import read_minutes
from jetcron.bus.kv import Store
from jetcron.bus.server import EmbeddedNats
from jetcron.bus.streams import ServerStreams
from jetcron.bus.topology import ensure_topology
from jetcron.core.clock import ManualClock
from jetcron.core.lifecycle.finished import MINUTE, FinishedMinute, Tally, first_minute, minute_of, stamp
from jetcron.core.models import Run, RunState
from jetcron.wire import subjects as s
from jetcron_services.run_tracker.finished import FinishedCounts
from jetcron_services.runtime import Context

OUTCOMES = [(RunState.SUCCEEDED, 0.9), (RunState.FAILED, 0.05), (RunState.DEAD, 0.03), (RunState.CANCELLED, 0.02)]
FILL_CONCURRENCY = 256


def _runs(n: int, tenants: int, at: datetime, rng: random.Random) -> list[Run]:
    states = [o for o, _ in OUTCOMES]
    weights = [w for _, w in OUTCOMES]
    out = []
    for i in range(n):
        tenant = f"t{i % tenants}"
        ended = at + timedelta(seconds=i / n)
        out.append(Run(run_id=f"{tenant}.j{i}.x", job=f"{tenant}.j{i}", tenant=tenant,
                       state=rng.choices(states, weights)[0], scheduled_at=ended, due_at=ended,
                       created_at=ended - timedelta(seconds=1), finished_at=ended))
    return out


def tally_cost(rate: int, tenants: int) -> dict[str, Any]:
    runs = _runs(rate * 10, tenants, datetime.now(UTC), random.Random(1))
    tally = Tally()
    now = runs[-1].finished_at or datetime.now(UTC)
    start = time.perf_counter()
    for run in runs:
        tally.seen(run, was_live=True, now=now)
    elapsed = time.perf_counter() - start
    return {"runs": len(runs), "us_per_run": round(elapsed / len(runs) * 1e6, 2),
            "cpu_share_at_rate": round(elapsed / len(runs) * rate, 5)}


async def writes(js: JetStreamContext, rate: int, tenants: int, seconds: int) -> dict[str, Any]:
    store = await Store.open(js, s.BUCKET_FINISHED, FinishedMinute)
    clock = ManualClock(minute_of(datetime.now(UTC)))
    ctx = cast(Context, SimpleNamespace(clock=clock, log=SimpleNamespace(warning=lambda *a, **k: None)))
    counts = FinishedCounts(ctx, store)
    rng = random.Random(2)
    written, flushes, ran = 0, [], 0
    for _ in range(seconds):
        batch = _runs(rate, tenants, clock.now(), rng)
        for run in batch:
            counts.noted(run, True, True)
        ran += len(batch)
        clock.advance(1)
        start = time.perf_counter()
        written += await counts.maybe_flush(clock.now(), write=True)
        flushes.append(time.perf_counter() - start)
    total = 0
    for scope in (None, *(f"t{i}" for i in range(tenants))):
        for minute in {minute_of(clock.now() - timedelta(seconds=k)) for k in range(seconds + 2)}:
            found = await store.maybe(s.finished_key(scope, stamp(minute)))
            total += found[0].total if found is not None and scope is None else 0
    assert total == ran, (total, ran)  # every run counted once
    return {"runs": ran, "seconds": seconds, "tenants": tenants, "records_written": written,
            "writes_per_s": round(written / seconds, 1), "writes_per_run": round(written / ran, 4),
            "flush_ms_median": round(statistics.median(flushes) * 1000, 2),
            "flush_ms_p99": round(percentile(flushes, 99) * 1000, 2)}


async def _fill(store: Store[FinishedMinute], items: list[tuple[str, FinishedMinute]]) -> None:
    gate = asyncio.Semaphore(FILL_CONCURRENCY)

    async def one(key: str, value: FinishedMinute) -> None:
        async with gate:
            await store.put(key, value)

    await asyncio.gather(*(one(k, v) for k, v in items))


async def reads(js: JetStreamContext, tenants: int, days: float, reps: int) -> dict[str, Any]:
    store = await Store.open(js, s.BUCKET_FINISHED, FinishedMinute)
    await js.purge_stream(s.kv_stream(s.BUCKET_FINISHED))
    now = datetime.now(UTC)
    hour = first_minute(now, 60)
    scopes = [None, *(f"t{i}" for i in range(tenants))]
    counts = {"succeeded": 55, "failed": 3, "dead": 1, "cancelled": 1}
    minutes = int(days * 1440)
    old = [(s.finished_key(scope, stamp(m)), FinishedMinute(minute=m, counts=counts))
           for m in (hour - k * MINUTE for k in range(1, minutes - 59)) for scope in scopes]
    recent = [(s.finished_key(scope, stamp(m)), FinishedMinute(minute=m, counts=counts))
              for m in (hour + k * MINUTE for k in range(60)) for scope in scopes]
    start = time.perf_counter()
    await _fill(store, old)
    fill_s = time.perf_counter() - start
    # Days of minutes were written in seconds: the hour's records are written after a mark the read starts from,
    # as their last writes would be in a bucket that filled over days.
    await asyncio.sleep(1.5)
    mark = datetime.now(UTC) - timedelta(seconds=0.5)
    await _fill(store, recent)
    info = await js.stream_info(s.kv_stream(s.BUCKET_FINISHED))
    out: dict[str, Any] = {"days": days, "tenants": tenants, "records": int(info.state.messages),
                           "fill_puts_per_s": round(len(old) / fill_s),
                           "bytes_per_record": round(int(info.state.bytes) / max(1, int(info.state.messages)), 1),
                           "requests_per_read": 2}
    for who, tenant in (("admin", None), ("tenant", "t0")):
        times, got = [], 0
        for _ in range(reps):
            t0 = time.perf_counter()
            got = len(await read_minutes(ServerStreams(js), tenant, hour, written_since=mark))
            times.append(time.perf_counter() - t0)
        assert got == 60, got
        out[f"read_hour_{who}_ms_median"] = round(statistics.median(times) * 1000, 2)
        out[f"read_hour_{who}_ms_p99"] = round(percentile(times, 99) * 1000, 2)
        out[f"read_hour_{who}_records"] = got
    return out


async def per_run(js: JetStreamContext, n: int, read_n: int, rate: int, reps: int) -> dict[str, Any]:
    """One more acknowledged write per finished run: a counter increment or a compact message."""
    await js.add_stream(StreamConfig(name="BENCH_PLAIN", subjects=["bench.plain.>"]))
    await js.add_stream(StreamConfig(name="BENCH_CTR", subjects=["bench.ctr.>"], allow_msg_counter=True))
    subjects = [f"{t}.{o.value}" for t in ("t0", "t1", "t2") for o, _ in OUTCOMES]

    async def pipelined(prefix: str, headers: dict[str, str] | None) -> float:
        start = time.perf_counter()
        futures = [await js.publish_async(f"{prefix}.{subjects[i % len(subjects)]}", b"" if headers else
                                          b'{"t":"t0","o":"succeeded"}', headers=headers) for i in range(n)]
        await asyncio.gather(*futures)
        return n / (time.perf_counter() - start)

    plains, counters = [], []
    for _ in range(reps):  # in turn, so that a busy moment of a shared machine falls on both
        plains.append(await pipelined("bench.plain", None))
        counters.append(await pipelined("bench.ctr", {"Nats-Incr": "1"}))
    plain, counter = statistics.median(plains), statistics.median(counters)
    last = await js.get_last_msg("BENCH_CTR", f"bench.ctr.{subjects[0]}")
    # Reading one message per run back: everything since a time, counted per minute (what (c) would do).
    await js.add_stream(StreamConfig(name="BENCH_LOG", subjects=["bench.log"]))
    futures = [await js.publish_async("bench.log", b'{"t":"t0","o":"succeeded"}') for _ in range(read_n)]
    await asyncio.gather(*futures)
    start = time.perf_counter()
    sub = await js.pull_subscribe("bench.log", stream="BENCH_LOG", config=ConsumerConfig(
        deliver_policy=DeliverPolicy.BY_START_TIME, opt_start_time=datetime.now(UTC) - timedelta(hours=1),
        ack_policy=AckPolicy.NONE, mem_storage=True))
    read = 0
    while read < read_n:
        read += len(await sub.fetch(min(1000, read_n - read), timeout=5))
    read_s = time.perf_counter() - start
    for name in ("BENCH_PLAIN", "BENCH_CTR", "BENCH_LOG"):
        await js.delete_stream(name)
    return {"writes": n, "reps": reps, "plain_publish_per_s": round(plain), "counter_incr_per_s": round(counter),
            "counter_value": last.data.decode(), "per_run_read_msgs": read_n,
            "per_run_read_msgs_per_s": round(read_n / read_s),
            "per_run_read_hour_s_at_rate": round(rate * 3600 / (read_n / read_s), 1)}


async def main_async(args: argparse.Namespace) -> None:
    emit({"bench": "finished_tally", **tally_cost(args.rate, args.tenants)})
    with tempfile.TemporaryDirectory(prefix="jetcron-bench-") as tmp:
        server = EmbeddedNats(Path(tmp) / "nats", sync_always=args.sync == "always")
        server.start()
        try:
            nc = await nats.connect(server.url)
            js = nc.jetstream(timeout=10)
            await ensure_topology(js)
            sync = {"sync": args.sync}
            emit({"bench": "finished_writes", **sync, **await writes(js, args.rate, args.tenants, args.seconds)})
            emit({"bench": "finished_read", **sync, **await reads(js, args.tenants, args.days, args.reps)})
            emit({"bench": "finished_per_run", **sync, **await per_run(js, args.per_run_writes, args.per_run_read,
                                                                        args.rate, args.per_run_reps)})
            await nc.close()
        finally:
            server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rate", type=int, default=300, help="runs finishing per second")
    parser.add_argument("--tenants", type=int, default=10)
    parser.add_argument("--seconds", type=int, default=120, help="simulated seconds of finishing runs")
    parser.add_argument("--days", type=float, default=7.0, help="days of minutes in the bucket for the read")
    parser.add_argument("--reps", type=int, default=20, help="reads of the last hour, each way")
    parser.add_argument("--per-run-writes", type=int, default=20_000)
    parser.add_argument("--per-run-read", type=int, default=100_000)
    parser.add_argument("--per-run-reps", type=int, default=3, help="rounds of plain publishes and increments")
    parser.add_argument("--sync", choices=("always", "default"), default="always")
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()

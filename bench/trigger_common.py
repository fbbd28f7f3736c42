"""Shared pieces of the trigger benchmarks: synthetic jobs, run records read in bulk, results saved."""

from __future__ import annotations

import asyncio
from datetime import datetime

import nats
import nats.errors

from jetcron.bus.kv import Store
from jetcron.core.ids import DEFAULT_TENANT
from jetcron.core.models import JobRecord, JobSpec, Resources, Run, Schedule, ScheduleKind
from jetcron.wire import subjects as s
from jetcron.wire.codec import encode


def job_record(name: str, *, anchor: datetime, every: float, created: datetime,
               tenant: str = DEFAULT_TENANT) -> JobRecord:
    """An interval job anchored at `anchor`, as the API would store it (tiny resources: sim agents)."""
    spec = JobSpec(name=name, tenant=tenant, command=["true"], resources=Resources(cpu=0.001, memory_mb=1),
                   schedule=Schedule(kind=ScheduleKind.EVERY, every_seconds=every, anchor=anchor))
    return JobRecord(spec=spec, created_at=created, updated_at=created)


async def store_jobs(url: str, records: list[JobRecord], in_flight: int = 2000) -> float:
    """Write job records straight into the jobs bucket, pipelined (the API's validation is not what is measured).

    Returns the seconds it took."""
    nc = await nats.connect(url)
    js = nc.jetstream()
    loop = asyncio.get_running_loop()
    started = loop.time()
    for i in range(0, len(records), in_flight):
        await asyncio.gather(*(js.publish(f"$KV.{s.BUCKET_JOBS}.{r.spec.key}", encode(r), timeout=60)
                               for r in records[i:i + in_flight]))
    took = loop.time() - started
    await nc.close()
    return took


async def reports_settled(url: str, expected: int) -> bool:
    """At least `expected` finish reports are stored and the tracker has taken every event in: only then is
    it worth reading every run record (a read of 100,000 records every few seconds competed with the tracker
    for the server it measured). Two requests; a server too busy to answer them in time (a herd draining) is
    taken as not settled yet, to be asked again, not as the bench failing."""
    try:
        nc = await nats.connect(url)
    except (nats.errors.NoServersError, TimeoutError):
        return False
    try:
        js = nc.jetstream()
        finished = s.event_subject("finished", "*")  # from every agent
        info = await js.stream_info(s.STREAM_EVENTS, subjects_filter=finished)
        consumer = await js.consumer_info(s.STREAM_EVENTS, s.CONSUMER_TRACKER)
        return sum((info.state.subjects or {}).values()) >= expected and not (
            consumer.num_pending or consumer.num_ack_pending)
    except TimeoutError:  # nats.errors.TimeoutError is one
        return False
    finally:
        await nc.close()


async def read_runs_exact(url: str, prefix: str = "") -> list[Run]:
    """Every run record of jobs named `prefix`..., from the stream's per-subject key list, then each record.

    Slower than a KV watch, but never short (a watch's end-of-data marker can overtake its data, which a
    count of missed occurrences would take for a miss) and it has not hung where a watch of 10,000 did.
    Reads are pipelined 500 at a time."""
    nc = await nats.connect(url)
    try:
        store = await Store.open(nc.jetstream(), s.BUCKET_RUNS, Run)
        keys = [k for k in await store.keys() if k.startswith(prefix)]
        found: list[tuple[Run, int] | None] = []
        for i in range(0, len(keys), 500):
            found += await asyncio.gather(*(store.maybe(k) for k in keys[i:i + 500]))
        return [f[0] for f in found if f is not None]
    finally:
        await nc.close()

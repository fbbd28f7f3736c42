"""Takeover after kill -9 of a trigger replica holding shards: N schedules, two replicas, the trigger alone.

Only the trigger runs (runs are recorded and handed to the placement stream; nobody places them): what is
measured is the trigger's failover. Figures: takeover (kill -> the survivor holds every shard), the latest
an occurrence of the dead replica's shards was recorded past the moment it is normally staged (nominal minus
the staging horizon), and missed / off-grid occurrences in a window around the kill.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections import Counter, defaultdict
from datetime import UTC, datetime, timedelta

import nats

from bench import raw_js
from bench.common import emit, summary, system
from bench.trigger_common import job_record, read_runs_exact, store_jobs
from jetcron.bus import lease as lease_store
from jetcron.core.ids import shard_of

SHARDS = 16
HORIZON = 2.0


async def _scenario(jc: object, n: int, every: float, prefix: str) -> dict[str, float]:
    url = jc.url  # type: ignore[attr-defined]
    nc = await nats.connect(url)
    leases = lease_store.on_server(nc.jetstream())
    now = datetime.now(UTC)
    anchor = now + timedelta(seconds=3)
    # Nominals spread evenly over the interval: n / every occurrences per second
    records = [job_record(f"{prefix}{i:06d}", anchor=anchor + timedelta(seconds=every * i / n), every=every,
                          created=now) for i in range(n)]
    await store_jobs(url, records)
    while True:  # balanced: each replica holds its fair share
        counts = Counter((await leases.shard_holders(SHARDS)).values())
        if sum(counts.values()) == SHARDS and len(counts) == 2 and max(counts.values()) == SHARDS // 2:
            break
        await asyncio.sleep(0.1)
    await asyncio.sleep(max(8.0, n / 20_000))  # both replicas warm, firing, the window past the anchors
    held = await leases.shard_holders(SHARDS)
    victim_shards = {shard for shard, who in held.items() if who == "trigger-1"}
    killed = time.monotonic()
    killed_at = datetime.now(UTC)
    jc.kill("trigger-1")  # type: ignore[attr-defined]
    while True:
        held = await leases.shard_holders(SHARDS)
        if len(held) == SHARDS and set(held.values()) == {"trigger-2"}:
            break
        await asyncio.sleep(0.02)
    takeover = time.monotonic() - killed
    await asyncio.sleep(12)
    await nc.close()

    start, end = killed_at - timedelta(seconds=5), killed_at + timedelta(seconds=10)
    seen: dict[str, set[datetime]] = defaultdict(set)
    late = 0.0
    duplicates = 0  # a second record of one occurrence (its run id is derived from it, so another id)
    for run in await read_runs_exact(url, prefix):
        if start <= run.scheduled_at <= end:
            duplicates += run.scheduled_at in seen[run.job]
            seen[run.job].add(run.scheduled_at)
            if shard_of(run.job, SHARDS) in victim_shards and run.scheduled_at >= killed_at:
                staged_by = run.scheduled_at - timedelta(seconds=HORIZON)
                late = max(late, (run.created_at - staged_by).total_seconds())
    missed = off_grid = 0
    step = timedelta(seconds=every)
    for record in records:
        first = record.spec.schedule.anchor
        assert first is not None
        k0 = max(0, -(-(start - first) // step))
        expected = {first + k * step for k in range(k0, k0 + int((end - start) / step) + 2)
                    if start <= first + k * step <= end}
        got = seen.get(record.spec.name, set())
        missed += len(expected - got)
        off_grid += len(got - expected)
    return {"takeover_s": takeover, "latest_record_past_staging_s": late, "missed": missed,
            "off_grid": off_grid, "duplicates": duplicates, "victim_shards": len(victim_shards),
            "occurrences_checked": sum(len(v) for v in seen.values())}


def run(n: int, every: float, reps: int, ttl: float) -> dict[str, object]:
    results, raws = [], []
    for rep in range(reps):
        with system(sync_always=True, services=(), JETCRON_TRIGGER_LEASE_TTL=str(ttl)) as jc:
            for name in ("trigger-1", "trigger-2"):
                jc.start(name, "trigger", JETCRON_AGENT_ID=name, JETCRON_TRIGGER_LEASE_TTL=str(ttl))
            jc.wait_ready()
            results.append(asyncio.run(_scenario(jc, n, every, f"k{rep}x")))
            raws.append(asyncio.run(raw_js.measure(jc.url)))
        print(f"rep {rep}: {results[-1]}", file=sys.stderr, flush=True)  # progress; stdout is the JSON
    return {"bench": f"trigger_takeover_{n}_ttl{ttl:g}", "schedules": n, "every_s": every, "lease_ttl_s": ttl,
            "sync_always": True, **raw_js.fields(raws), **{k: summary([r[k] for r in results]) for k in results[0]}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--schedules", type=int, default=1000)
    parser.add_argument("--every", type=float, default=10.0, help="interval of each schedule, seconds")
    parser.add_argument("--ttl", type=float, default=2.0, help="JETCRON_TRIGGER_LEASE_TTL")
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    emit(run(args.schedules, args.every, args.reps, args.ttl))


if __name__ == "__main__":
    main()

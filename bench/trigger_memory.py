"""Trigger memory per schedule: RSS growth of the warm state (records, cursors, due index) at N schedules.

In-process, no server: each job record and cursor is encoded to the bytes the KV watch delivers, decoded the
way the watch decodes it, and fed to the same `Warm` the trigger service keeps. Each size runs in a fresh
subprocess so one measurement's heap does not flatter the next.
"""

from __future__ import annotations

import argparse
import gc
import json
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta

from bench.common import emit, summary
from bench.trigger_common import job_record


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


def measure(n: int) -> dict[str, float]:
    """In this process: feed n jobs and n cursors; bytes of RSS growth per schedule."""
    from jetcron.core.ids import run_id
    from jetcron.core.models import JobRecord
    from jetcron.wire.codec import decode, encode
    from jetcron.wire.messages import Cursor
    from jetcron_services.trigger.warm import Warm

    now = datetime(2026, 1, 1, tzinfo=UTC)
    warm = Warm(16)
    gc.collect()
    before = _rss_bytes()
    started = time.perf_counter()
    for i in range(n):
        # Realistic variety: each job created at its own instant, on one of a few hundred schedules
        name = f"job{i:07d}"
        created = now + timedelta(milliseconds=i)
        record = job_record(name, anchor=now + timedelta(seconds=i % 300), every=60 * (1 + i % 60), created=created)
        warm.job_changed(name, decode(encode(record), JobRecord), now)
        last = created + timedelta(seconds=i % 3600)
        cursor = Cursor(job=name, last=last, version=1, last_run=run_id(name, last))
        warm.cursor_changed(name, decode(encode(cursor), Cursor), i + 1)
    took = time.perf_counter() - started
    gc.collect()
    grown = _rss_bytes() - before
    return {"bytes_per_schedule": grown / n, "rss_growth_mb": grown / 2**20, "load_us_per_schedule": took / n * 1e6}


def run(n: int, reps: int) -> dict[str, object]:
    per, total, load = [], [], []
    for _ in range(reps):
        out = subprocess.run([sys.executable, "-m", "bench.trigger_memory", "--child", str(n)],
                             capture_output=True, text=True, check=True)
        got = json.loads(out.stdout)
        per.append(got["bytes_per_schedule"])
        total.append(got["rss_growth_mb"])
        load.append(got["load_us_per_schedule"])
    return {"bench": f"trigger_memory_{n}", "schedules": n, "bytes_per_schedule": summary(per),
            "rss_growth_mb": summary(total), "decode_and_load_us_per_schedule": summary(load),
            "what": "RSS growth of the trigger's warm state (job record + cursor + due-index entry per schedule)"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(args.child)))
        return
    for n in args.sizes:
        emit(run(n, args.reps))


if __name__ == "__main__":
    main()

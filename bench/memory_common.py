"""What the in-process memory benches share (`bench.placement_memory`, `bench.tracker_memory`): a service's
Context on the bus's twins, a midnight herd's records as the runs watch delivers them, and each measurement in a
fresh subprocess (one traced for the heap, one untraced for the RSS), so that one measurement's heap does not
flatter the next."""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
from collections.abc import Callable, Coroutine, Iterator, Sequence
from datetime import datetime, timedelta
from typing import Any, cast

from bench.common import emit

KINDS = ("heap", "rss")
"""heap: tracemalloc's count of what the objects kept hold (exact); rss: what the process asked of the system
meanwhile (it also counts the allocator's slack, and undercounts where freed memory was reused)."""


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


def service_context(name: str) -> Any:
    """A service's Context on the twins: settings, clock and log are what the view and the leader (or the tracker's
    reconciler) read."""
    from jetcron.bus.lease import Leases
    from jetcron.bus.memory import (
        MemoryBuckets,
        MemoryConsumers,
        MemoryLeaseLog,
        MemoryPublisher,
        MemoryRecords,
        MemoryRpc,
        MemoryStreams,
    )
    from jetcron.config import Settings
    from jetcron.core.models import AgentInfo, JobRecord, Run, TenantPolicy
    from jetcron.core.timing.calendars import CalendarRecord
    from jetcron.ops.retention import History
    from jetcron.wire import subjects as s
    from jetcron.wire.messages import Cursor
    from jetcron_services.runtime import Context, SystemClock

    settings, clock = Settings(), SystemClock()
    tenants = MemoryRecords(s.BUCKET_TENANTS, TenantPolicy)
    return Context(
        name=name, settings=settings, link=cast(Any, None),
        jobs=MemoryRecords(s.BUCKET_JOBS, JobRecord), runs=MemoryRecords(s.BUCKET_RUNS, Run),
        cursors=MemoryRecords(s.BUCKET_CURSORS, Cursor), agents=MemoryRecords(s.BUCKET_AGENTS, AgentInfo),
        tenants=tenants, calendars=MemoryRecords(s.BUCKET_CALENDARS, CalendarRecord),
        leases=Leases(MemoryLeaseLog()), history=History(tenants, settings.history), publisher=MemoryPublisher(),
        rpc=MemoryRpc(), buckets=MemoryBuckets(), consumers=MemoryConsumers(), streams=MemoryStreams(clock.now),
        clock=clock)


def herd_records(n: int, now: datetime) -> list[bytes]:
    """n scheduled records as the watch delivers them: a midnight herd of one-shot jobs over three tenants."""
    from jetcron.core.lifecycle.runs import new_run
    from jetcron.core.models import JobSpec, Resources, RunState
    from jetcron.wire.codec import encode

    out = []
    for i in range(n):
        spec = JobSpec(name=f"herd{i:07d}", command=["true"], resources=Resources(cpu=1, memory_mb=256),
                       tenant=f"tenant-{i % 3}")
        due = now + timedelta(milliseconds=i % 1000)
        out.append(encode(new_run(spec, run_id=f"herd{i:07d}.r1", state=RunState.SCHEDULED, scheduled_at=due,
                                  due_at=due, now=now)))
    return out


def children(module: str, n: int, modes: Sequence[str], reps: int) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(mode, kind, what the child measured) for each repetition, mode and kind, each in a fresh `module --child`."""
    for _ in range(reps):
        for mode in modes:
            for kind in KINDS:
                out = subprocess.run([sys.executable, "-m", module, "--child", str(n), "--mode", mode,
                                      *(["--trace"] if kind == "heap" else [])],
                                     capture_output=True, text=True, check=True)
                yield mode, kind, json.loads(out.stdout)


Measure = Callable[[int, str, bool], Coroutine[Any, Any, dict[str, float]]]
"""One child's measurement: (runs, mode, traced) -> its figures."""


def main(doc: str | None, modes: Sequence[str], measure: Measure, run: Callable[[int, int], dict[str, object]]) -> None:
    """The bench's command line: `--sizes` and `--reps` run it (each size's result on stdout); `--child` is one
    measurement, in the process `children` starts."""
    parser = argparse.ArgumentParser(description=doc)
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--mode", choices=modes, default=modes[-1], help=argparse.SUPPRESS)
    parser.add_argument("--trace", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(asyncio.run(measure(args.child, args.mode, args.trace))))
        return
    for n in args.sizes:
        emit(run(n, args.reps))

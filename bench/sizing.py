"""What each thing jetcron keeps costs the server, in stored bytes: a job record, a run record (a sim run's final
record with its spec snapshot), a run event, a line of output. Measured on a real server by making N of a thing
and dividing the stream's byte count (`state.bytes`: subject, headers, data and the store's own framing per
message) by N, so the figures are what a disk holds, not what a message carries.

Phases, each on the same running system and measured as the difference of every stream before and after:
- **jobs**: `--jobs` cron jobs (a daily job with a zone, a command with arguments), which do not fire meanwhile;
- **runs**: `--runs` occurrences of every-second jobs on a sim agent (what bench/longlife.py drives);
- **logs**: `--log-runs` runs each on a real agent: one printing nothing (what any run costs the log stream, its
  end marker), one printing `--lines` 80-byte lines one at a time (a chunk per line, the costliest shape), one
  printing them at once (one chunk).

docs/operations.md, "Sizing the streams", multiplies these out; `projection` here does the same for the
figures it was given (`--per-day`, `--keep-days`, `--events`, `--lines-per-run`).
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from functools import partial
from typing import Any

import msgspec
import nats
from nats.js import JetStreamContext
from nats.js.api import DeliverPolicy

from bench.common import ROOT, System, emit, system
from bench.longlife import CATCHUP_SECONDS
from bench.longlife_ledger import is_terminal
from bench.longlife_sampler import streams
from jetcron.bus.kv import drop_subscription
from jetcron.bus.ordered import in_order
from jetcron.sdk.client import Client
from jetcron.wire import subjects as s

LINE = b"x" * 79 + b"\n"
"""An 80-byte line of output."""
AGENT = {"JETCRON_AGENT_SLOTS": "64", "JETCRON_AGENT_CPU": "1000", "JETCRON_AGENT_MEMORY_MB": "10000000",
         # Finish reports stored, as a cluster behind on its reports stores them (a report handed to the trackers
         # directly is not): the projection's events per run is the worst case.
         "JETCRON_REPORT_BY": "stream"}
_RUNS_PREFIX = len(s.kv_subject(s.BUCKET_RUNS, ""))
Streams = dict[str, dict[str, int]]


class _State(msgspec.Struct):
    state: str = ""


_STATE = msgspec.json.Decoder(_State)


class Records:
    """The run records written so far, and which of them finished (from the runs bucket's stream, in order)."""

    def __init__(self) -> None:
        self.written: set[str] = set()
        self.finished: set[str] = set()

    async def run(self, js: JetStreamContext) -> None:
        sub = await js.subscribe(s.RUN_CHANGES, stream=s.kv_stream(s.BUCKET_RUNS), ordered_consumer=True,
                                 deliver_policy=DeliverPolicy.ALL)
        try:
            async for msg in in_order(sub):
                if not msg.data:
                    continue
                key = msg.subject[_RUNS_PREFIX:]
                self.written.add(key)
                if is_terminal(_STATE.decode(msg.data).state):
                    self.finished.add(key)
        finally:
            await drop_subscription(js, sub)

    def of(self, prefix: str) -> tuple[int, int]:
        """(written, finished) records of the jobs whose names start with `prefix`."""
        return (sum(1 for k in self.written if k.startswith(prefix)),
                sum(1 for k in self.finished if k.startswith(prefix)))

    async def settled(self, prefix: str, at_least: int, timeout: float) -> int:
        """Wait until `at_least` records of `prefix` exist and every one has finished; their number."""
        deadline = time.monotonic() + timeout
        while True:
            written, finished = self.of(prefix)
            if written >= at_least and finished == written:
                return written
            if time.monotonic() > deadline:
                raise TimeoutError(f"{prefix}: {finished} of {written} runs finished (wanted {at_least})")
            await asyncio.sleep(0.2)


def delta(before: Streams, after: Streams) -> dict[str, dict[str, int]]:
    """Messages and bytes each stream gained (streams that did not change left out)."""
    out: dict[str, dict[str, int]] = {}
    for name, state in after.items():
        old = before.get(name, {"messages": 0, "bytes": 0})
        d = {"messages": state["messages"] - old["messages"], "bytes": state["bytes"] - old["bytes"]}
        if d["messages"] or d["bytes"]:
            out[name] = d
    return out


def _job_spec(name: str) -> dict[str, Any]:
    """A typical job: a nightly command with arguments, in a zone, retried, with a timeout."""
    return {"name": name, "command": ["/usr/local/bin/backup.sh", "--full", "--target", "s3://backups/db"],
            "schedule": {"kind": "cron", "cron": "30 1 * * *", "tz": "America/New_York"},
            "retry": {"max_attempts": 3}, "timeout_seconds": 3600, "resources": {"cpu": 0.5, "memory_mb": 256}}


def _every_spec(name: str, anchor_ms: int) -> dict[str, Any]:
    anchor = datetime.fromtimestamp(anchor_ms / 1000, UTC).isoformat(timespec="milliseconds")
    return {"name": name, "command": ["true"], "resources": {"cpu": 0.001, "memory_mb": 1},
            "schedule": {"kind": "every", "every_seconds": 1, "anchor": anchor},
            "misfire": {"catchup_window_seconds": CATCHUP_SECONDS}, "require": {"kind": "sim"}}


def _log_spec(name: str, script: str) -> dict[str, Any]:
    return {"name": name, "command": ["sh", "-c", script], "resources": {"cpu": 0.001, "memory_mb": 1},
            "require": {"kind": "real"}}


async def _gather(names: list[str], call: Callable[[str], Awaitable[Any]], width: int = 32) -> None:
    gate = asyncio.Semaphore(width)

    async def one(name: str) -> None:
        async with gate:
            await call(name)

    await asyncio.gather(*(one(n) for n in names))


class Sizing:
    def __init__(self, jc: System, args: argparse.Namespace) -> None:
        self.jc, self.args = jc, args
        self.phases: dict[str, dict[str, dict[str, int]]] = {}

    async def measure(self, name: str, work: Callable[[], Awaitable[None]]) -> dict[str, dict[str, int]]:
        before = await asyncio.to_thread(streams, self.jc.server.monitor_url)
        await work()
        await asyncio.sleep(1.0)  # the last acknowledged writes are in the counts the monitor port reports
        after = await asyncio.to_thread(streams, self.jc.server.monitor_url)
        self.phases[name] = delta(before, after)
        return self.phases[name]

    async def run(self) -> dict[str, Any]:
        args = self.args
        nc = await nats.connect(self.jc.url, **self.jc.identity.options())
        records = Records()
        watching = asyncio.create_task(records.run(nc.jetstream(timeout=30)))
        client = await Client.connect(self.jc.url, timeout=60, identity=self.jc.identity)
        try:
            jobs = [f"nightly-db-backup-{i:05d}" for i in range(args.jobs)]
            await self.measure("jobs", lambda: _gather(
                jobs, lambda n: client.call("jobs.create", {"spec": _job_spec(n)})))
            await self.measure("runs", lambda: self._sim_runs(client, records))
            line = LINE.decode().rstrip("\n")
            shapes = {
                "quiet": "true",
                "paced": f"i=0; while [ $i -lt {args.lines} ]; do echo {line}; i=$((i+1)); sleep 0.05; done",
                "batched": f"yes {line} | head -n {args.lines}",
            }
            for shape, script in shapes.items():
                names = [f"log-{shape}-{i}" for i in range(args.log_runs)]
                await self.measure(f"logs_{shape}", partial(self._log_runs, client, records, names, script))
        finally:
            watching.cancel()
            await asyncio.gather(watching, return_exceptions=True)
            await client.close()
            await nc.close()
        return self._result()

    async def _sim_runs(self, client: Client, records: Records) -> None:
        """Every-second jobs on the sim agent until `--runs` occurrences are recorded; then paused, and every run
        recorded waited for."""
        args = self.args
        first = (int(time.time()) + 3 + args.sim_jobs // 50) * 1000
        anchors = {f"sim-{i}": first + i * 1000 // args.sim_jobs for i in range(args.sim_jobs)}
        names = list(anchors)
        await _gather(names, lambda n: client.call("jobs.create", {"spec": _every_spec(n, anchors[n])}))
        deadline = time.monotonic() + 60 + args.runs / 20
        while records.of("sim-")[0] < args.runs:
            if time.monotonic() > deadline:
                raise TimeoutError(f"only {records.of('sim-')} sim runs recorded")
            await asyncio.sleep(0.1)
        await _gather(names, lambda n: client.call("jobs.pause", {"name": n}))
        await records.settled("sim-", args.runs, timeout=60)

    async def _log_runs(self, client: Client, records: Records, names: list[str], script: str) -> None:
        await _gather(names, lambda n: client.call("jobs.create", {"spec": _log_spec(n, script)}))
        await records.settled(names[0].rsplit("-", 1)[0] + "-", len(names), timeout=120)

    def _result(self) -> dict[str, Any]:
        args, p = self.args, self.phases
        jobs, runs = p["jobs"], p["runs"]
        kv_runs, kv_jobs = s.kv_stream(s.BUCKET_RUNS), s.kv_stream(s.BUCKET_JOBS)
        n_runs = runs[kv_runs]["messages"]  # history 1: one message per run
        events = runs.get(s.STREAM_EVENTS, {"messages": 0, "bytes": 0})

        def logs(shape: str) -> dict[str, int]:
            return p[f"logs_{shape}"].get(s.STREAM_LOGS, {"messages": 0, "bytes": 0})

        paced, batched = logs("paced"), logs("batched")
        chunk, end, line = log_costs(paced, batched, runs=args.log_runs, lines=args.lines)
        real_events = p["logs_quiet"].get(s.STREAM_EVENTS, {"messages": 0})["messages"] / args.log_runs
        long_events = p["logs_paced"].get(s.STREAM_EVENTS, {"messages": 0})["messages"] / args.log_runs
        cursors = runs.get(s.kv_stream(s.BUCKET_CURSORS), {"messages": 0, "bytes": 0})  # one per scheduled job
        bytes_per = {
            "job_record": round(jobs[kv_jobs]["bytes"] / args.jobs, 1),
            "run_record": round(runs[kv_runs]["bytes"] / n_runs, 1),
            "run_event": round(events["bytes"] / max(1, events["messages"]), 1),
            "log_line": round(line + chunk, 1),
            "log_line_batched": round(line + chunk * _chunks(batched, args.log_runs) / (args.log_runs * args.lines),
                                      1),
            "log_chunk_overhead": round(chunk, 1), "log_end_marker": round(end, 1),
            "log_quiet_run": round(logs("quiet")["bytes"] / args.log_runs, 1),
            "real_run_record": round(p["logs_quiet"][kv_runs]["bytes"] / args.log_runs, 1),
            "job_cursor": round(cursors["bytes"] / max(1, cursors["messages"]), 1),
        }
        per_run = {"events_sim": round(events["messages"] / n_runs, 2), "events_real": round(real_events, 2),
                   "events_real_printing": round(long_events, 2),
                   "log_messages_paced": round(paced["messages"] / args.log_runs, 2),
                   "log_messages_batched": round(batched["messages"] / args.log_runs, 2)}
        return {
            "bench": "sizing", "sync_always": args.sync == "always", "runs": n_runs, "jobs": args.jobs,
            "log_runs": args.log_runs, "lines_per_log_run": args.lines, "line_bytes": len(LINE),
            "commit": _commit(), "date": time.strftime("%Y-%m-%d", time.gmtime()),
            "bytes_per": bytes_per, "per_run": per_run, "phases": p,
            "projection": projection(bytes_per, per_day=args.per_day, keep_days=args.keep_days, events=args.events,
                                     lines=args.lines_per_run, jobs=args.project_jobs),
        }


def _chunks(logs: dict[str, int], runs: int) -> int:
    """Output chunks among a shape's log messages: every run that printed also wrote one end marker."""
    return logs["messages"] - runs


def log_costs(paced: dict[str, int], batched: dict[str, int], *, runs: int, lines: int) -> tuple[float, float, float]:
    """(bytes a chunk costs beyond its data, bytes of a run's end marker, bytes of a line's data) from two shapes
    that printed the same lines in different numbers of chunks: the difference is chunks times their cost."""
    data = runs * lines * len(LINE)
    extra = _chunks(paced, runs) - _chunks(batched, runs)
    chunk = (paced["bytes"] - batched["bytes"]) / extra if extra else 0.0
    end = (batched["bytes"] - data - _chunks(batched, runs) * chunk) / runs
    return chunk, end, float(len(LINE))


def projection(bytes_per: dict[str, float], *, per_day: int, keep_days: float, events: float, lines: float,
               jobs: int) -> dict[str, Any]:
    """Bytes a node's disk holds for `per_day` runs kept `keep_days`, each with `events` events and `lines` lines
    of output (one chunk per line: the costliest shape), and `jobs` jobs with 16 versions of history each at most.
    In an R3 cluster every node holds a whole copy: the figure is per node, whatever the node count."""
    kept = per_day * keep_days
    runs = kept * bytes_per["run_record"]
    ev = kept * events * bytes_per["run_event"]
    logs = kept * (lines * bytes_per["log_line"] + bytes_per["log_end_marker"]) if lines else 0.0
    job_bytes = jobs * bytes_per["job_record"]
    total = runs + ev + logs + job_bytes
    gib = 1024**3
    return {"runs_per_day": per_day, "keep_days": keep_days, "events_per_run": events, "lines_per_run": lines,
            "jobs": jobs, "runs_kept": round(kept), "runs_gib": round(runs / gib, 2), "events_gib": round(ev / gib, 2),
            "logs_gib": round(logs / gib, 2), "jobs_gib": round(job_bytes / gib, 3),
            "total_gib_per_node": round(total / gib, 2)}


def _commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def run(args: argparse.Namespace) -> dict[str, Any]:
    with system(sync_always=args.sync == "always", agents=0, JETCRON_METRICS_HOST="127.0.0.1") as jc:
        jc.start("agent-sim", "agent", JETCRON_AGENT_ID="agent-sim", JETCRON_AGENT_SIM="true",
                 JETCRON_AGENT_LABELS="kind=sim", **AGENT)
        jc.start("agent-real", "agent", JETCRON_AGENT_ID="agent-real", JETCRON_AGENT_SIM="false",
                 JETCRON_AGENT_LABELS="kind=real", **AGENT)
        jc.wait_ready()
        return asyncio.run(Sizing(jc, args).run())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=1000, help="job records made (and cron jobs measured)")
    parser.add_argument("--runs", type=int, default=3000, help="sim runs of every-second jobs")
    parser.add_argument("--sim-jobs", type=int, default=100, help="every-second jobs the sim runs come from")
    parser.add_argument("--log-runs", type=int, default=20, help="real runs per output shape")
    parser.add_argument("--lines", type=int, default=50, help="80-byte lines per run that prints")
    parser.add_argument("--sync", choices=["always", "default"], default="always")
    parser.add_argument("--per-day", type=int, default=1_000_000, help="projection: runs a day")
    parser.add_argument("--keep-days", type=float, default=3.0, help="projection: days a finished run is kept")
    parser.add_argument("--events", type=float, default=2.0, help="projection: events per run")
    parser.add_argument("--lines-per-run", type=float, default=20.0, help="projection: lines of output per run")
    parser.add_argument("--project-jobs", type=int, default=10_000, help="projection: jobs defined")
    emit(run(parser.parse_args()))


if __name__ == "__main__":
    main()

"""`make bench-longlife`: months of history compressed into hours. Millions of runs of recurring jobs through a
system whose finished history ages out in minutes, with a ledger of every occurrence that must have been
recorded, and a minute-by-minute record of the server's streams and every process's memory.

What it shows: whether disk and memory level off once the retention window has passed (nothing grows with the
number of runs ever made), whether any occurrence was lost or recorded twice on the way (a run record that aged
out and was made again by a late trigger would be counted twice), and whether anything was refused. Retention
is set short (`--keep-seconds`, `--min-seconds`: JETCRON_HISTORY_KEEP_SECONDS and _MIN_SECONDS) and the jobs'
catch-up window too (30 s: a job's runs are kept at least that long), so a day of a real cluster's turnover
passes in minutes.

The jobs fire every second, each from its own anchor (whole milliseconds spread across the second, so the load
is even and each run id names one occurrence): `--jobs` of them offer that many runs per second. Keep that
below what the system sustains (`always` sync on two shared cores: 300-600 runs/s); a system run past its
capacity falls behind, and its misfire policy then skips occurrences (counted by state in the result).

The per-minute series goes to bench/results/longlife/longlife-<date>.json (`bench/longlife_plot.py` draws it);
the summary is printed as one JSON line like every bench.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import signal
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec
import nats
from nats.js import JetStreamContext
from nats.js.api import DeliverPolicy

from bench.common import RESULTS, System, emit, system
from bench.longlife_ledger import Ledger, Verdict
from bench.longlife_sampler import LogScanner, Processes, disk_bytes, scrape, streams
from jetcron.bus.kv import bind, drop_subscription, scan_keys
from jetcron.bus.ordered import in_order, stream_sequence
from jetcron.sdk.client import Client
from jetcron.wire import subjects as s

SERIES_DIR = RESULTS / "longlife"
SERVICES = ("api", "trigger", "placement", "run_tracker", "notifier")
"""Every service a scheduled run passes through, and the notifier, which reads every change of every record."""
PERIOD_MS = 1000
CATCHUP_SECONDS = 30.0
"""The jobs' misfire catch-up window: a run record is kept at least this long (it is its occurrence's fire gate),
so the default hour would hold history far past the short retention asked for."""
CONCURRENCY = 64
"""API calls in flight while the jobs are made and paused."""
_RUNS_PREFIX = len(s.kv_subject(s.BUCKET_RUNS, ""))


class _State(msgspec.Struct):
    state: str = ""


_STATE = msgspec.json.Decoder(_State)


class Watcher:
    """Every write to the runs bucket's stream, in order, from its first message: each one into the ledger."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger
        self.seq = 0
        """The stream sequence of the last write read: the stream's last sequence minus this is how far behind."""
        self.undecodable = 0

    async def run(self, js: JetStreamContext) -> None:
        sub = await js.subscribe(s.RUN_CHANGES, stream=s.kv_stream(s.BUCKET_RUNS), ordered_consumer=True,
                                 deliver_policy=DeliverPolicy.ALL)
        try:
            async for msg in in_order(sub):
                self.seq = stream_sequence(msg.reply)
                key = msg.subject[_RUNS_PREFIX:]
                if not msg.data:  # a delete or purge marker: the record was removed or aged out
                    self.ledger.removed(key)
                    continue
                try:
                    state = _STATE.decode(msg.data).state
                except msgspec.DecodeError:
                    self.undecodable += 1
                    continue
                self.ledger.write(key, state)
        finally:
            await drop_subscription(js, sub)


def anchors(jobs: int, first_ms: int) -> dict[str, int]:
    """Each job's first fire, spread over one period in whole milliseconds."""
    return {f"ll{i}": first_ms + i * PERIOD_MS // jobs for i in range(jobs)}


def spec(name: str, anchor_ms: int) -> dict[str, Any]:
    anchor = datetime.fromtimestamp(anchor_ms / 1000, UTC).isoformat(timespec="milliseconds")
    return {"name": name, "command": ["true"], "resources": {"cpu": 0.001, "memory_mb": 1},
            "schedule": {"kind": "every", "every_seconds": PERIOD_MS / 1000, "anchor": anchor},
            "misfire": {"catchup_window_seconds": CATCHUP_SECONDS}}


async def _each(names: list[str], call: Any) -> None:
    gate = asyncio.Semaphore(CONCURRENCY)

    async def one(name: str) -> None:
        async with gate:
            await call(name)

    await asyncio.gather(*(one(n) for n in names))


def now_ms() -> int:
    return int(time.time() * 1000)


class Bench:
    """One long-life run: its ledger, its watcher, its samples."""

    def __init__(self, jc: System, args: argparse.Namespace) -> None:
        self.jc, self.args = jc, args
        self.started, start_ms = time.monotonic(), now_ms()
        lead_ms = int(args.lead * 1000) if args.lead else 10_000 + args.jobs * 20
        self.first_ms = math.ceil((start_ms + lead_ms) / 1000) * 1000
        self.first_fire_t = (self.first_ms - start_ms) / 1000
        self.ledger = Ledger(anchors(args.jobs, self.first_ms), PERIOD_MS)
        self.watcher = Watcher(self.ledger)
        node = jc.server.nodes[0]
        self.store = node.store_dir
        pids = {"nats-server": jc.server.pids()[0], **{name: p.pid for name, p in jc.procs.items()},
                "bench": os.getpid()}
        self.processes = Processes(pids)
        logs = {name: jc.base / f"{name}.log" for name in jc.procs}
        if node.log_path is not None:
            logs["nats-server"] = node.log_path
        self.logs = LogScanner(logs)
        self.metrics_urls: dict[str, str] = {}
        """Each service's /metrics, by the name the harness started it under (found in jc_services by pid)."""
        self.samples: list[dict[str, Any]] = []
        self.stalled: list[float | None] = []
        """--stall: when the service was frozen and when it went on (seconds since start)."""
        self.stopped_t = 0.0
        """When the jobs were paused (seconds since start): the samples after it show the drain, not a trend."""
        self._last = (self.started, 0)
        self.checkpoint = Path(args.series + ".partial") if args.series and args.series != "-" else None
        """The samples so far, rewritten after each: a run of hours cut short (its machine taken back) keeps its
        series up to the last minute. Removed once the result is written."""

    def t(self) -> float:
        return round(time.monotonic() - self.started, 1)

    def sample(self) -> dict[str, Any]:
        """One point of the series (blocking reads: run in a thread, the watcher keeps reading meanwhile)."""
        mono, finished = time.monotonic(), self.ledger.terminal_writes
        interval = mono - self._last[0]
        per_stream = streams(self.jc.server.monitor_url)
        on_disk = disk_bytes(self.store)
        for name, state in per_stream.items():
            state["disk_bytes"] = on_disk.get(name, 0)
        rss, cpu = self.processes.sample(interval)
        at = now_ms()
        verdict = self.ledger.judge(at - int(self.args.settle * 1000), written=False, examples=0)
        runs_stream = per_stream.get(s.kv_stream(s.BUCKET_RUNS), {})
        point = {
            "t_s": self.t(), "at": datetime.now(UTC).isoformat(timespec="seconds"),
            "finished_writes": finished,
            "runs_per_s": round((finished - self._last[1]) / interval, 1) if interval > 0 else 0.0,
            "due": self.ledger.due(at),
            "unfinished_past_settle": verdict.lost, "recorded_twice": verdict.recorded_twice,
            "revived": verdict.revived, "removals": self.ledger.removals,
            "watch_lag": max(0, runs_stream.get("last_seq", 0) - self.watcher.seq),
            "streams": per_stream, "rss_bytes": rss, "cpu_cores": cpu, "refusals": self.logs.scan(),
            "metrics": {name: scrape(url) for name, url in self.metrics_urls.items()},
        }
        self._last = (mono, finished)
        self.samples.append(point)
        if self.checkpoint is not None:
            self.checkpoint.parent.mkdir(parents=True, exist_ok=True)
            self.checkpoint.write_text(json.dumps({"partial": True, "samples": self.samples}, sort_keys=True) + "\n")
        print(f"[longlife] t={point['t_s']:.0f}s finished={finished} {point['runs_per_s']}/s "
              f"unfinished={verdict.lost} twice={verdict.recorded_twice} lag={point['watch_lag']}",
              file=sys.stderr, flush=True)
        return point

    async def run(self) -> dict[str, Any]:
        args = self.args
        nc = await nats.connect(self.jc.url, **self.jc.identity.options())
        watching = asyncio.create_task(self.watcher.run(nc.jetstream(timeout=30)))
        client = await Client.connect(self.jc.url, timeout=60, identity=self.jc.identity)
        names = list(self.ledger.anchors)
        await _each(names, lambda n: client.call("jobs.create", {"spec": spec(n, self.ledger.anchors[n])}))
        if now_ms() >= self.first_ms:
            raise SystemExit(f"making {len(names)} jobs took past their first fire: give a longer --lead")
        self.metrics_urls = await self._metrics_urls(nc.jetstream(timeout=10))
        stalling = asyncio.create_task(self._stall()) if args.stall else None
        await asyncio.to_thread(self.sample)
        every = args.sample_seconds
        next_sample = time.monotonic() + every
        while self.ledger.due(now_ms()) < args.runs:
            await asyncio.sleep(max(0.0, min(1.0, next_sample - time.monotonic())))
            if time.monotonic() >= next_sample:
                await asyncio.to_thread(self.sample)
                next_sample += every
            if watching.done():
                watching.result()  # the watch failed: say why
        self.stopped_t = self.t()
        if stalling is not None:
            stalling.cancel()  # a stall still to come or under way ends with the firing (SIGCONT in its finally)
            await asyncio.gather(stalling, return_exceptions=True)
        firing_s, finished = self.stopped_t - self.first_fire_t, self.ledger.terminal_writes
        stopped = await self._pause(client, names)
        verdict = await self._drain(stopped, next_sample)
        await asyncio.to_thread(self.sample)
        watching.cancel()
        await asyncio.gather(watching, return_exceptions=True)
        await client.close()
        await nc.close()
        return self._result(verdict, finished / max(1.0, firing_s))

    async def _stall(self) -> None:
        """--stall NAME:AT:SECONDS: freeze the service NAME (SIGSTOP) AT seconds after the first fire, and let it go
        on (SIGCONT) SECONDS later. What it shows: whether the system works off the backlog the stall left and
        comes back to the offered rate, or collapses under it. The process is this bench's own child."""
        name, at, seconds = self.args.stall
        pid = self.jc.procs[name].pid
        await asyncio.sleep(max(0.0, self.first_fire_t + at - self.t()))
        os.kill(pid, signal.SIGSTOP)
        self.stalled = [self.t(), None]
        try:
            await asyncio.sleep(seconds)
        finally:
            os.kill(pid, signal.SIGCONT)
            self.stalled[1] = self.t()

    async def _metrics_urls(self, js: JetStreamContext) -> dict[str, str]:
        """Where each started process serves /metrics: the services bucket names it by pid (jetcron.bus.registry)."""
        by_pid = {p.pid: name for name, p in self.jc.procs.items()}
        urls: dict[str, str] = {}
        kv = bind(js, s.BUCKET_SERVICES)
        for key in await scan_keys(js, s.BUCKET_SERVICES, ">"):
            try:
                entry = await kv.get(key)
            except Exception:  # aged out between the listing and the read
                continue
            if entry.value:
                instance = msgspec.json.decode(entry.value)
                name = by_pid.get(int(instance.get("pid", 0)))
                url = str(instance.get("metrics_url") or "")
                if name and url:
                    urls[name] = url if url.endswith("/metrics") else url.rstrip("/") + "/metrics"
        return urls

    async def _pause(self, client: Client, names: list[str]) -> dict[str, int]:
        """Stop every job: occurrences due after (pause - settle) are no longer owed."""
        stopped: dict[str, int] = {}
        settle = int(self.args.settle * 1000)

        async def pause(name: str) -> None:
            stopped[name] = now_ms() - settle
            await client.call("jobs.pause", {"name": name})

        await _each(names, pause)
        return stopped

    async def _drain(self, stopped: dict[str, int], next_sample: float) -> Verdict:
        """Wait until every owed occurrence has finished, or --drain seconds."""
        deadline = time.monotonic() + self.args.drain
        while True:
            verdict = self.ledger.judge(now_ms(), stopped)
            if verdict.lost == 0 or time.monotonic() > deadline:
                return verdict
            await asyncio.sleep(1.0)
            if time.monotonic() >= next_sample:
                await asyncio.to_thread(self.sample)
                next_sample += self.args.sample_seconds

    def _result(self, verdict: Verdict, rate: float) -> dict[str, Any]:
        """`rate`: finished runs per second from the first fire to the stop (the drain after it left out)."""
        args, ledger = self.args, self.ledger
        retention_t = self.first_fire_t + max(args.keep_seconds, args.min_seconds, CATCHUP_SECONDS)
        return {
            "bench": "longlife", "sync_always": args.sync == "always", "runs_target": args.runs, "jobs": args.jobs,
            "offered_runs_per_s": args.jobs * 1000 / PERIOD_MS, "keep_seconds": args.keep_seconds,
            "min_seconds": args.min_seconds, "catchup_window_seconds": CATCHUP_SECONDS, "settle_s": args.settle,
            "first_fire_t_s": self.first_fire_t, "retention_from_t_s": round(retention_t, 1),
            "stopped_t_s": self.stopped_t,
            **({"stall": {"service": args.stall[0], "from_t_s": self.stalled[0] if self.stalled else None,
                          "until_t_s": self.stalled[1] if self.stalled else None}} if args.stall else {}),
            "elapsed_s": self.t(), "runs_per_s": round(rate, 1),
            "lost": verdict.lost, "recorded_twice": verdict.recorded_twice,
            "ledger": {**verdict.as_dict(), "terminal_by_state": ledger.states, "writes": ledger.writes,
                       "removals": ledger.removals, "foreign": ledger.foreign, "off_grid": ledger.off_grid,
                       "undecodable": self.watcher.undecodable},
            "samples": len(self.samples), **trends(self.samples, retention_t, self.stopped_t),
            "refusals": self.samples[-1]["refusals"] if self.samples else {},
        }


def trends(samples: list[dict[str, Any]], after_t: float, until_t: float) -> dict[str, Any]:
    """Per stream: bytes at the end, the most, and the growth per minute once the retention window has passed
    and before the jobs stopped (least squares over those samples: about 0 when history ages out as fast as it
    is made). Per process: RSS at the end and the most."""
    if not samples:
        return {}
    last = samples[-1]
    late = [p for p in samples if after_t <= p["t_s"] <= until_t]
    out: dict[str, Any] = {"streams_end": {}, "rss_end_bytes": last["rss_bytes"], "rss_max_bytes": {}}
    for name, state in last["streams"].items():
        series = [(p["t_s"], p["streams"].get(name, {}).get("bytes", 0)) for p in samples]
        if not any(b for _, b in series):
            continue  # a stream that stayed empty (the series keeps it)
        row = {"messages": state["messages"], "bytes": state["bytes"], "disk_bytes": state.get("disk_bytes", 0),
               "max_bytes": max(b for _, b in series)}
        tail = [(t, b) for t, b in series if after_t <= t <= until_t]
        row["bytes_per_min_after_retention"] = round(_slope(tail) * 60) if len(tail) >= 3 else None
        out["streams_end"][name] = row
    out["rss_per_min_after_retention"] = {}
    for name in last["rss_bytes"]:
        values = [p["rss_bytes"].get(name) or 0 for p in samples]
        out["rss_max_bytes"][name] = max(values)
        tail = [(p["t_s"], p["rss_bytes"].get(name) or 0) for p in late]
        out["rss_per_min_after_retention"][name] = round(_slope(tail) * 60) if len(tail) >= 3 else None
    out["samples_after_retention"] = len(late)
    return out


def _slope(points: list[tuple[float, int]]) -> float:
    n = len(points)
    mean_t = sum(t for t, _ in points) / n
    mean_b = sum(b for _, b in points) / n
    var = sum((t - mean_t) ** 2 for t, _ in points)
    return 0.0 if var == 0 else sum((t - mean_t) * (b - mean_b) for t, b in points) / var


def run(args: argparse.Namespace) -> dict[str, Any]:
    with system(sync_always=args.sync == "always", agents=args.agents, sim=True, services=SERVICES,
                JETCRON_HISTORY_KEEP_SECONDS=str(args.keep_seconds), JETCRON_HISTORY_MIN_SECONDS=str(args.min_seconds),
                JETCRON_METRICS_HOST="127.0.0.1") as jc:
        bench = Bench(jc, args)
        result = asyncio.run(bench.run())
        samples = bench.samples
    if args.series == "-":
        result["series_samples"] = samples
    elif args.series:
        path = Path(args.series)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"result": result, "samples": samples}, sort_keys=True) + "\n")
        if bench.checkpoint is not None:
            bench.checkpoint.unlink(missing_ok=True)
        result["series"] = str(path.relative_to(Path.cwd()) if path.is_relative_to(Path.cwd()) else path)
    return result


def _stall_arg(text: str) -> tuple[str, float, float]:
    parts = text.split(":")
    if len(parts) != 3 or parts[0] not in SERVICES:
        raise argparse.ArgumentTypeError(f"--stall {text!r}: give SERVICE:AT:SECONDS, SERVICE one of "
                                         f"{', '.join(SERVICES)}")
    try:
        return parts[0], float(parts[1]), float(parts[2])
    except ValueError:
        raise argparse.ArgumentTypeError(f"--stall {text!r}: AT and SECONDS are seconds (numbers)") from None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3_000_000, help="occurrences due in all before the jobs stop")
    parser.add_argument("--jobs", type=int, default=300, help="jobs firing every second: the offered runs/s")
    parser.add_argument("--agents", type=int, default=2, help="sim agents (512 slots each)")
    parser.add_argument("--keep-seconds", type=float, default=120.0, help="JETCRON_HISTORY_KEEP_SECONDS")
    parser.add_argument("--min-seconds", type=float, default=60.0, help="JETCRON_HISTORY_MIN_SECONDS")
    parser.add_argument("--sample-seconds", type=float, default=60.0, help="seconds between samples")
    parser.add_argument("--settle", type=float, default=10.0,
                        help="an occurrence due this long ago must have finished (misfire grace 5 s + horizon 2 s)")
    parser.add_argument("--drain", type=float, default=120.0, help="seconds to wait for the last runs after the stop")
    parser.add_argument("--lead", type=float, default=0.0, help="seconds from start to the first fire "
                        "(default 10 s + 20 ms per job: the jobs must all exist before it)")
    parser.add_argument("--sync", choices=["always", "default"], default="always")
    parser.add_argument("--stall", type=_stall_arg, default=None, metavar="SERVICE:AT:SECONDS",
                        help="freeze SERVICE (SIGSTOP) AT seconds after the first fire for SECONDS, then SIGCONT")
    parser.add_argument("--series", default=str(SERIES_DIR / f"longlife-{time.strftime('%Y%m%d-%H%M%S')}.json"),
                        help="where the per-minute series goes; '-' puts it in the printed result instead")
    args = parser.parse_args()
    emit(run(args))


if __name__ == "__main__":
    main()

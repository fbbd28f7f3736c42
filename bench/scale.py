"""The design's scale scenarios on a virtual fleet (bench/fleet.py), with fsync before ack.

`--scenario steady_day`: `--schedules` cron jobs loaded (daily, at an hour that does not come during the run:
the trigger holds them all in its index), then `--agents` agents with `--slots` slots each take `--rate` new
runs per second for `--minutes`, each simulated for an exponentially drawn time (`--seconds` its mean, capped at
5 times it), so that about rate x mean runs are in flight (Little's law: the design's 50,000 in flight are 83
runs/s of 10 minutes). Measured once the first `--warmup` seconds have passed: submit -> started p50 / p99 (the
run record's created_at to started_at), runs in flight, the server's writes/s by stream (bench/liveness.py's
purposes), and each service's CPU share and memory. Every run must end succeeded, once.

`--scenario dead_hosts`: `--agents` agents with `--slots` slots each run as many long runs (simulated, `--seconds`
each); once every one is running, `--kill` agents are killed (SIGKILL: their loops stop, their sockets shut) and
`--freeze` others frozen (SIGSTOP: their loops block) past their lease, one right after the other (the spread
is reported). Measured by the runs watch from the moment each agent's own kill or freeze began: when each run it
held is re-dispatched (its record at attempt 2); the frozen agents are thawed
once every such run is, and must fence their attempts rather than report them. Checked at the end, when every
run has ended: each run succeeded, exactly one success was reported for it (none ran to success twice), every
other run at attempt 1, and at which attempt the runs of the dead and frozen agents ended (2, unless placement
sent attempt 2 to an agent it did not know dead yet: it forgets one 4 heartbeats after its last). Prints one JSON
line: each repetition and a summary (medians [min-max]); the target is every run re-dispatched within the lease
TTL + 5 s.

`--scenario midnight`: `--runs` runs due at one instant on the same fleet (bench/midnight.py says what is
measured).

Each repetition's series (start delays over time, writes/s by purpose, memory) goes to `--series` (a folder;
`-`: none), for bench/scale_plot.py. The steady day (10,000 agents, 50,000 runs in flight) and midnight
(1,000,000 runs at one instant) do not fit one 2-core machine: docs/benchmarks.md, "Scale", says what did and why.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import os
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import nats

from bench import raw_js
from bench.common import ROOT, System, emit, percentile, submit_now_jobs, summary, system
from bench.fleet import Fleet, ProcessFleet, _proc_cpu, _proc_rss, _stream_seq, _total_stored, finished_reports
from bench.liveness import PURPOSES
from bench.midnight import midnight
from jetcron.config import Settings
from jetcron.core.host.sim import SimExecution
from jetcron.core.models import Run
from jetcron.sdk.client import Client
from jetcron.wire import subjects as s
from jetcron.wire.codec import decode

PREFIX = "dh"
SAMPLE_S = 10.0


class Watch:
    """Every run record of this scenario as the runs watch delivers it, with when (monotonic) each run was first
    seen at attempt 2 or later (lost and handed to placement again: re-dispatched), and first seen placed at it
    (assigned, running or ended: only once a slot is free, and every slot is busy in dead_hosts)."""

    def __init__(self) -> None:
        self.runs: dict[str, Run] = {}
        self.redispatched_at: dict[str, float] = {}
        self.placed_at: dict[str, float] = {}
        self.changed = asyncio.Event()

    async def follow(self, jc: System, stop: asyncio.Event) -> None:
        nc = await nats.connect(jc.url, **jc.identity.options())
        try:
            kv = await nc.jetstream().key_value(s.BUCKET_RUNS)
            watcher = await kv.watch(">")
            async for entry in watcher:
                if stop.is_set():
                    break
                if entry is None or entry.value is None or not entry.key.startswith(PREFIX):
                    continue
                run = decode(entry.value, Run)
                self.runs[entry.key] = run
                if run.attempt >= 2 and entry.key not in self.redispatched_at:
                    self.redispatched_at[entry.key] = time.monotonic()
                placed = run.state.value in ("assigned", "running") or run.state.terminal
                if run.attempt >= 2 and placed and entry.key not in self.placed_at:
                    self.placed_at[entry.key] = time.monotonic()
            await watcher.stop()
        finally:
            await nc.close()

    def count(self, state: str) -> int:
        return sum(1 for r in self.runs.values() if r.state == state)


async def _reports(jc: System) -> Counter[str]:
    """Successes reported per run of this scenario, every report stored from the stream's start."""
    nc = await nats.connect(jc.url, **jc.identity.options())
    try:
        return await finished_reports(nc.jetstream(), PREFIX, "succeeded", quiet=3.0)
    finally:
        await nc.close()


async def _wait(what: str, check: Any, timeout: float) -> float:
    started = time.monotonic()
    while not check():
        if time.monotonic() - started > timeout:
            raise TimeoutError(f"{what}: not within {timeout}s")
        await asyncio.sleep(0.1)
    return time.monotonic() - started


async def dead_hosts(jc: System, fleet: Fleet | ProcessFleet,
                     args: argparse.Namespace) -> tuple[dict[str, Any], dict[str, Any]]:
    runs = args.agents * args.slots
    watch, stop = Watch(), asyncio.Event()
    following = asyncio.create_task(watch.follow(jc, stop))
    client = await Client.connect(jc.url, timeout=60, identity=jc.identity)
    try:
        await submit_now_jobs(client, PREFIX, runs, ["true"], concurrency=32)
        await _wait("every run running", lambda: watch.count("running") == runs, args.seconds / 2)
        ids = list(fleet.agents)
        killed, frozen = ids[:args.kill], ids[args.kill:args.kill + args.freeze]
        held = {run_id: run.agent for run_id, run in watch.runs.items() if run.agent in {*killed, *frozen}}
        # One at a time, each call returning once its agent is dead or frozen (up to ~0.1 s each among 300 agents
        # on one GIL): a run's delay counts from the moment its own agent's call began, which is no later than
        # that agent stopped, so no delay is understated.
        lost_at: dict[str, float] = {}
        for agent_id, stop_one in [(a, fleet.kill) for a in killed] + [(a, fleet.freeze) for a in frozen]:
            lost_at[agent_id] = time.monotonic()
            stop_one(agent_id)
        first_lost = min(lost_at.values())
        await _wait("every run of a dead or frozen agent re-dispatched",
                    lambda: set(held) <= set(watch.redispatched_at), args.ttl + 60)
        delays = [watch.redispatched_at[r] - lost_at[agent] for r, agent in held.items() if agent]
        since_first = [watch.redispatched_at[r] - first_lost for r in held]
        placed = [watch.placed_at[r] - lost_at[agent] for r, agent in held.items() if agent and r in watch.placed_at]
        for agent_id in frozen:
            fleet.thaw(agent_id)
        await _wait("every run ended", lambda: sum(1 for r in watch.runs.values() if r.state.terminal) == runs,
                    2 * args.seconds + 120)
        await asyncio.sleep(2)  # a thawed attempt that did report would have done so by now
        successes = await _reports(jc)
    finally:
        stop.set()
        following.cancel()
        await client.close()
    states = Counter(r.state.value for r in watch.runs.values())
    attempts = Counter((r.run_id in held, r.attempt) for r in watch.runs.values())
    held_attempts = Counter(r.attempt for r in watch.runs.values() if r.run_id in held)
    return {
        "runs": runs, "held_by_dead_or_frozen": len(held),
        "redispatch_p50_s": round(percentile(delays, 50), 2), "redispatch_p99_s": round(percentile(delays, 99), 2),
        "redispatch_max_s": round(max(delays), 2), "within_ttl_plus_5": sum(1 for d in delays if d <= args.ttl + 5),
        "losses_spread_s": round(max(lost_at.values()) - first_lost, 2),
        "redispatch_since_first_loss_max_s": round(max(since_first), 2),
        "placed_again_before_thaw": len(placed),
        "states": dict(states),
        "held_at_attempt_2": attempts[(True, 2)], "others_at_attempt_1": attempts[(False, 1)],
        "held_ended_at_attempt": {str(k): v for k, v in sorted(held_attempts.items())},
        "succeeded_once": sum(1 for r in watch.runs if successes[r] == 1),
        "succeeded_twice_or_more": sum(1 for r in watch.runs if successes[r] > 1),
    }, {"ttl": args.ttl, "redispatched_s": sorted(round(d, 3) for d in delays),
        "placed_again_s": sorted(round(d, 3) for d in placed)}


async def _load_schedules(jc: System, count: int) -> float:
    """`count` daily cron jobs due at 03:17 UTC (not during a run of this bench), through the API; seconds taken."""
    client = await Client.connect(jc.url, timeout=60, identity=jc.identity)
    gate, started = asyncio.Semaphore(32), time.monotonic()

    async def one(i: int) -> None:
        async with gate:
            await client.call("jobs.create", {"spec": {
                "name": f"cron{i}", "command": ["true"], "schedule": {"kind": "cron", "cron": "17 3 * * *"},
                "resources": {"cpu": 0.001, "memory_mb": 1}}})

    try:
        await asyncio.gather(*(one(i) for i in range(count)))
    finally:
        await client.close()
    return time.monotonic() - started


async def steady_day(jc: System, args: argparse.Namespace) -> tuple[dict[str, Any], dict[str, Any]]:
    watch, stop = Watch(), asyncio.Event()
    following = asyncio.create_task(watch.follow(jc, stop))
    client = await Client.connect(jc.url, timeout=60, identity=jc.identity)
    total = int(args.rate * args.minutes * 60)
    pids = {name: proc.pid for name, proc in jc.procs.items()}
    pids["nats-server"] = jc.server.pids()[0]
    samples: list[dict[str, Any]] = []
    try:
        started, sent = time.monotonic(), 0
        measuring: dict[str, Any] | None = None
        while sent < total:
            due = int((time.monotonic() - started) * args.rate)
            batch = [client.call("jobs.create", {"spec": {"name": f"{PREFIX}{i}", "command": ["true"],
                                                          "resources": {"cpu": 0.001, "memory_mb": 1}}})
                     for i in range(sent, min(due, total))]
            sent += len(batch)
            await asyncio.gather(*batch)
            elapsed = time.monotonic() - started
            if measuring is None and elapsed >= args.warmup:
                measuring = {"at": time.monotonic(), "sent": sent, "seq": _seqs(jc), "cpu": _cpu(pids)}
            if not samples or time.monotonic() - samples[-1]["at"] >= SAMPLE_S:
                samples.append({"at": time.monotonic(), "t_s": round(elapsed, 1), "in_flight": watch.count("running"),
                                "seq": _seqs(jc),
                                "rss_mib": {n: round(_proc_rss(p) / 2**20, 1) for n, p in pids.items()}})
            await asyncio.sleep(max(0.0, (sent + 1) / args.rate - (time.monotonic() - started)))
        assert measuring is not None, "--warmup is longer than the run"
        end = {"at": time.monotonic(), "seq": _seqs(jc), "cpu": _cpu(pids)}
        await _wait("every run ended", lambda: sum(1 for r in watch.runs.values() if r.state.terminal) == total,
                    args.seconds * 5 + 120)
        successes = await _reports(jc)
    finally:
        stop.set()
        following.cancel()
        await client.close()
    span = end["at"] - measuring["at"]
    first = min(r.created_at for r in watch.runs.values())
    measured = [r for r in watch.runs.values()
                if r.started_at is not None and int(r.run_id[len(PREFIX):].split(".")[0]) >= measuring["sent"]]
    delays = [(r.started_at - r.created_at).total_seconds() for r in measured if r.started_at is not None]
    during = [s for s in samples if s["at"] >= measuring["at"]]
    return {
        "runs": total, "measured_runs": len(delays), "window_s": round(span, 1),
        "submit_to_started_p50_s": round(percentile(delays, 50), 3),
        "submit_to_started_p99_s": round(percentile(delays, 99), 3),
        "submit_to_started_max_s": round(max(delays), 3),
        "in_flight_median": sorted(x["in_flight"] for x in during)[len(during) // 2],
        "writes_per_s": {p: round((end["seq"][p] - measuring["seq"][p]) / span, 1) for p in measuring["seq"]},
        "cpu_pct": {n: round(100 * (end["cpu"][n] - measuring["cpu"][n]) / span, 1) for n in pids},
        "rss_mib_last": samples[-1]["rss_mib"],
        "states": dict(Counter(r.state.value for r in watch.runs.values())),
        "succeeded_once": sum(1 for r in watch.runs if successes[r] == 1),
        "succeeded_twice_or_more": sum(1 for r in watch.runs if successes[r] > 1),
    }, {
        "warmup_s": args.warmup,
        "delays": sorted([round((r.created_at - first).total_seconds(), 2),
                          round((r.started_at - r.created_at).total_seconds(), 3)]
                         for r in watch.runs.values() if r.started_at is not None),
        "samples": [{"t_s": b["t_s"], "in_flight": b["in_flight"], "rss_mib": b["rss_mib"],
                     "writes_per_s": {p: round((b["seq"][p] - a["seq"][p]) / (b["at"] - a["at"]), 1)
                                      for p in b["seq"]}}
                    for a, b in itertools.pairwise(samples)],
    }


def _seqs(jc: System) -> dict[str, int]:
    found = {p: _stream_seq(jc, name) for p, name in PURPOSES.items()}
    found["all"] = _total_stored(jc)
    return found


def _cpu(pids: dict[str, int]) -> dict[str, float]:
    return {name: _proc_cpu([pid]) for name, pid in pids.items()}


def measure(args: argparse.Namespace, rep: int) -> dict[str, Any]:
    with system(sync_always=True, services=("api", "trigger", "placement", "run_tracker"),
                JETCRON_RUN_LEASE_TTL=str(args.ttl), JETCRON_HEARTBEAT=str(args.heartbeat)) as jc:
        # Every finish by the events stream: "none succeeded twice" counts the success reports stored there.
        base = Settings(nats_url=jc.url, nats_monitor_url=jc.server.monitor_url, data_dir=str(jc.base),
                        heartbeat=args.heartbeat, run_lease_ttl=args.ttl, agent_cpu=float(args.slots),
                        agent_memory_mb=1024 * args.slots, report_by="stream")
        loaded = asyncio.run(_load_schedules(jc, args.schedules)) if args.scenario == "steady_day" else 0.0
        seconds = f"exp:{args.seconds},{args.seconds * 5}" if args.scenario == "steady_day" else f"fixed:{args.seconds}"
        fleet: Fleet | ProcessFleet = (
            ProcessFleet(base, args.agents, processes=args.processes, slots=args.slots, seconds=seconds,
                         exit_codes="0", log=Path(args.log)) if args.processes > 1 else
            Fleet(base, args.agents, slots=args.slots, sim=SimExecution.parse(seconds, "0")))
        # the virtual agents' JSON logs (structlog's, bound to stdout at boot)
        with open(args.log, "a") as log, contextlib.redirect_stdout(log):
            fleet.start(timeout=max(120.0, args.agents / 5))
            try:
                if args.scenario == "steady_day":
                    result, series = asyncio.run(steady_day(jc, args))
                    # The server's ceiling on the same system right after the day, its writes' share of it
                    raw = asyncio.run(raw_js.measure(jc.url))
                    result = {"schedules": args.schedules, "schedules_load_s": round(loaded, 1), **result,
                              "raw_publish_ack_per_s": round(raw["publish_ack_per_s"]),
                              "raw_kv_cas_per_s": round(raw["kv_cas_per_s"]),
                              "writes_share_of_raw_publish": round(
                                  result["writes_per_s"]["all"] / raw["publish_ack_per_s"], 3)}
                elif args.scenario == "midnight":
                    result, series = asyncio.run(midnight(jc, args.agents * args.slots, args))
                else:
                    result, series = asyncio.run(dead_hosts(jc, fleet, args))
            finally:
                fleet.stop()
    if args.series != "-":
        folder = Path(args.series)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{args.scenario}-{rep}.json").write_text(json.dumps({"result": result, **series}) + "\n")
    return result


SUMMARIES = {
    "dead_hosts": ("redispatch_p99_s", "redispatch_max_s"),
    "steady_day": ("submit_to_started_p50_s", "submit_to_started_p99_s"),
    "midnight": ("first_wave_last_start_s", "rest_rate_per_s", "lag_behind_capacity_max_s", "last_start_s"),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scenario", default="dead_hosts", choices=list(SUMMARIES))
    parser.add_argument("--schedules", type=int, default=100_000, help="steady_day: cron jobs loaded")
    parser.add_argument("--rate", type=float, default=50.0, help="steady_day: runs submitted per second")
    parser.add_argument("--minutes", type=float, default=10.0, help="steady_day: how long they are submitted")
    parser.add_argument("--warmup", type=float, default=120.0, help="steady_day: seconds before measuring")
    parser.add_argument("--runs", type=int, default=30_000, help="midnight: runs due at the instant")
    parser.add_argument("--lead", type=float, default=200.0, help="midnight: seconds from storing the jobs to the "
                        "instant (room for storing them and for runs / JETCRON_TRIGGER_HERD_RATE s of staging)")
    parser.add_argument("--tenants", default="alpha:1,beta:2,gamma:1", help="midnight: tenants and their weights")
    parser.add_argument("--agents", type=int, default=300)
    parser.add_argument("--slots", type=int, default=5)
    parser.add_argument("--processes", type=int, default=1,
                        help="fleet processes (one carries ~500 agents at a 2 s heartbeat: docs/fleet.md)")
    parser.add_argument("--kill", type=int, default=100)
    parser.add_argument("--freeze", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=60.0, help="each simulated run's duration")
    parser.add_argument("--ttl", type=float, default=10.0, help="JETCRON_RUN_LEASE_TTL")
    parser.add_argument("--heartbeat", type=float, default=2.0)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--series", default=str(ROOT / "bench" / "results" / "scale"),
                        help="folder for each repetition's series (bench/scale_plot.py); -: none")
    parser.add_argument("--log", default=os.path.join(os.environ.get("TMPDIR", "/tmp"), "jetcron-scale.log"))
    args = parser.parse_args()
    reps = []
    for rep in range(args.reps):
        reps.append(measure(args, rep))
        print(reps[-1], file=sys.stderr, flush=True)
    result: dict[str, Any] = {
        "bench": f"scale_{args.scenario}", "sync_always": True, "agents": args.agents, "slots": args.slots,
        "run_seconds": args.seconds, "run_lease_ttl": args.ttl, "heartbeat_s": args.heartbeat,
        "reps": reps, "date": time.strftime("%Y-%m-%d", time.gmtime())}
    result |= {key: summary([r[key] for r in reps if r[key] is not None]) for key in SUMMARIES[args.scenario]}
    if args.scenario == "dead_hosts":
        result |= {"kill": args.kill, "freeze": args.freeze}
    elif args.scenario == "steady_day":
        result |= {"schedules": args.schedules, "rate": args.rate, "minutes": args.minutes, "warmup_s": args.warmup}
    else:
        result |= {"runs": args.runs, "lead_s": args.lead, "tenants": args.tenants}
    emit(result)
    os._exit(0)  # killed agents' loops hold sockets and tasks never run again: leave without them


if __name__ == "__main__":
    main()

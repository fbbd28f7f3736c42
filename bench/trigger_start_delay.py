"""Start delay (nominal fire time -> process started, as the agent records it) under herds, on sim agents.

Scenario `second`: N interval schedules whose nominals are spread over one second (N per second), every
`--period` seconds, measured over `--rounds` rounds (the first round included: nothing is warmed up for it).
Scenario `instant`: N schedules due at the same instant (the midnight herd), with the default horizon and
herd rate: the trigger spreads the herd's staging back from the instant (jetcron.core.timing.herds). `--lead` must leave
room for storing the jobs and for N / rate seconds of staging. The two sim agents each have room for half
the herd and a little more (CPU for it, and a slot per run), so every run can be assigned ahead and
placement's bin-packing fills one agent, then the other: what is measured is staging, not capacity. (With
room for the whole herd on each, packing put all of it on one agent, whose start rate was then the tail.)

Jobs are written straight into the jobs bucket (pipelined): what is measured is trigger -> placement ->
agent, not the API. The delay of each run is its record's started_at minus scheduled_at.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from datetime import UTC, datetime, timedelta

from bench import raw_js
from bench.common import emit, percentile, summary, system
from bench.trigger_common import job_record, read_runs_exact, reports_settled, store_jobs
from jetcron.config import Settings


async def _herd(url: str, n: int, spread: float, lead: float, timeout: float, prefix: str,
                rounds: int = 1, period: float = 3600.0) -> dict[str, float]:
    now = datetime.now(UTC)
    due = now + timedelta(seconds=lead)
    records = [job_record(f"{prefix}{i:06d}", anchor=due + timedelta(seconds=spread * i / n), every=period,
                          created=now) for i in range(n)]
    stored_in = await store_jobs(url, records)
    # Wait until every run of every round has started (sim agents succeed at once) or the time is up
    last = due + timedelta(seconds=period * (rounds - 1))
    deadline = time.monotonic() + lead + period * (rounds - 1) + timeout
    runs = []
    while time.monotonic() < deadline:
        await asyncio.sleep(max(1.0, n / 20_000))
        if datetime.now(UTC) < last:
            continue
        try:  # bounded: a poll that hangs must not outlive the deadline
            if not await asyncio.wait_for(reports_settled(url, n * rounds), timeout=30):
                continue
            found = await asyncio.wait_for(read_runs_exact(url, prefix), timeout=max(60.0, n / 500))
        except TimeoutError:
            continue
        runs = [r for r in found if r.scheduled_at < last + timedelta(seconds=spread + 1)]
        if len(runs) >= n * rounds and all(r.started_at is not None for r in runs):
            break
    started = [r for r in runs if r.started_at is not None]
    delays = [(r.started_at - r.scheduled_at).total_seconds() * 1000 for r in started if r.started_at]
    staged = [(r.created_at - r.scheduled_at).total_seconds() * 1000 for r in runs]
    assigned = [(r.assigned_at - r.scheduled_at).total_seconds() * 1000 for r in runs if r.assigned_at]
    return {"p50_ms": percentile(delays, 50), "p99_ms": percentile(delays, 99), "max_ms": max(delays or [0.0]),
            "started": len(started), "recorded": len(runs), "expected": n * rounds,
            # Where the time went: recorded by the trigger, assigned by placement (negative: ahead of the nominal)
            "recorded_p50_ms": percentile(staged, 50), "recorded_p99_ms": percentile(staged, 99),
            "recorded_max_ms": max(staged, default=float("nan")),
            "assigned_p50_ms": percentile(assigned, 50), "assigned_p99_ms": percentile(assigned, 99),
            # Runs re-dispatched (a record's times are its latest attempt's: these show as late assignments)
            "second_attempts": sum(1 for r in runs if r.attempt > 1), "jobs_stored_s": stored_in}


def run(scenario: str, n: int, reps: int, lead: float, timeout: float, rounds: int = 5,
        period: float = 10.0) -> dict[str, object]:
    spread = 1.0 if scenario == "second" else 0.0
    if scenario == "instant":
        rounds, period = 1, 3600.0
    results, raws = [], []
    for rep in range(reps):
        # Instant: two sim agents with room for half the herd each, so it can all be assigned ahead (they execute
        # nothing); each job takes 0.001 cpu (trigger_common.job_record)
        room = {"JETCRON_AGENT_SLOTS": str(max(512, n)), "JETCRON_AGENT_CPU": str(max(1.0, n * 0.001 / 2 * 1.02))} \
            if scenario == "instant" else {}
        # Every finish by the events stream: the herd has settled once every report is stored there.
        with system(sync_always=True, agents=2, sim=True, agent_env={**room, "JETCRON_REPORT_BY": "stream"}) as jc:
            time.sleep(1.0)  # leaders elected, consumers bound
            results.append(asyncio.run(_herd(jc.url, n, spread, lead, timeout, f"h{rep}x", rounds, period)))
            raws.append(asyncio.run(raw_js.measure(jc.url)))  # after the herd, not competing with it
        print(f"rep {rep}: {results[-1]}", file=sys.stderr, flush=True)  # progress; stdout is the JSON
    return {"bench": f"trigger_start_delay_{scenario}_{n}", "scenario": scenario, "schedules": n,
            "spread_s": spread, "rounds": rounds, "period_s": period,
            "staging_horizon_s": Settings().trigger_horizon, "herd_rate_per_s": Settings().trigger_herd_rate,
            "sync_always": True,
            "agents": "2 sim" if scenario == "second" else "2 sim, room for half the herd each", **raw_js.fields(raws),
            **{k: summary([r[k] for r in results]) for k in results[0]}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--scenario", choices=["second", "instant"], default="second")
    parser.add_argument("--schedules", type=int, default=1000)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--lead", type=float, default=8.0, help="seconds from storing the jobs to the herd")
    parser.add_argument("--rounds", type=int, default=5, help="scenario second: rounds measured")
    parser.add_argument("--period", type=float, default=10.0, help="scenario second: seconds between rounds")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds after the herd to wait for it")
    args = parser.parse_args()
    emit(run(args.scenario, args.schedules, args.reps, args.lead, args.timeout, args.rounds, args.period))


if __name__ == "__main__":
    main()

"""The midnight scenario of bench/scale.py: `--runs` runs due at one instant on the virtual fleet.

The jobs are interval jobs anchored at the instant, `--lead` seconds ahead, spread over tenants of the weights
`--tenants` names (set through the API as the admin), written straight into the jobs bucket (as the herd bench
does: what is measured is trigger -> placement -> agents, not the API). The trigger stages the herd back from the
instant at its herd rate; placement assigns what the fleet's slots hold and keeps the rest waiting in its fair
queue; every simulated run takes `--seconds`. Measured from the records once every run has ended:

- recorded ahead: runs whose record was written before the instant (all, when staging kept up);
- the first wave: the fleet's capacity C (agents x slots) of earliest starts, its last start after the instant
  (the design: the first 50,000 within 5 s), and how many runs were assigned before the instant;
- the rest: the start rate after the first wave against the capacity rate C / seconds, and each run's lag behind
  the earliest start capacity allows it (run k of the queue cannot start before (k // C) x seconds): a lag that
  stays flat is start delay growing no faster than capacity allows, one that climbs is the system falling behind;
- fairness: while every tenant still had runs waiting (from the first wave's end until the first tenant's last
  start), each tenant's share of the starts against its weight's share;
- memory: the trigger's, placement's, the tracker's and the server's RSS every 5 s (peak and last);
- every run succeeded, exactly one success reported for each, none at a second attempt.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import nats

from bench.common import System, percentile
from bench.fleet import _proc_rss, finished_reports
from bench.trigger_common import job_record, read_runs_exact, reports_settled, store_jobs
from jetcron.sdk.client import Client

PREFIX = "mn"
SAMPLE_S = 5.0
WATCHED = ("trigger", "placement", "run_tracker")


def parse_weights(text: str) -> dict[str, float]:
    """`alpha:1,beta:2` -> {"alpha": 1.0, "beta": 2.0}."""
    weights = {}
    for part in text.split(","):
        name, _, weight = part.partition(":")
        weights[name.strip()] = float(weight or 1)
    return weights


async def _set_weights(jc: System, weights: dict[str, float]) -> None:
    admin = await Client.connect(jc.url, timeout=60, identity=jc.identity)
    try:
        for tenant, weight in weights.items():
            await admin.tenants.set(tenant, weight=weight)
    finally:
        await admin.close()


async def _successes(jc: System) -> Counter[str]:
    nc = await nats.connect(jc.url, **jc.identity.options())
    try:
        return await finished_reports(nc.jetstream(), "", "succeeded", quiet=3.0)
    finally:
        await nc.close()


async def midnight(jc: System, capacity: int, args: argparse.Namespace) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the result, its series for bench/scale_plot.py)."""
    weights = parse_weights(args.tenants)
    await _set_weights(jc, weights)
    await asyncio.sleep(1.0)  # placement's tenants watch has the weights before the first run is recorded
    names = list(weights)
    now = datetime.now(UTC)
    instant = now + timedelta(seconds=args.lead)
    records = [job_record(f"{PREFIX}{i:07d}", anchor=instant, every=86_400.0, created=now, tenant=names[i % len(names)])
               for i in range(args.runs)]
    stored_s = await store_jobs(jc.url, records)
    pids = {name: jc.procs[name].pid for name in WATCHED} | {"nats-server": jc.server.pids()[0]}
    rss: list[dict[str, Any]] = []
    deadline = time.monotonic() + args.lead + 3 * args.runs * args.seconds / capacity + 300
    runs: list[Any] = []
    while time.monotonic() < deadline:
        rss.append({"t_s": round((datetime.now(UTC) - instant).total_seconds(), 1),
                    **{n: round(_proc_rss(p) / 2**20, 1) for n, p in pids.items()}})
        # As many reports as runs is not every run ended (a re-run attempt reports too): then every record
        if datetime.now(UTC) > instant and await reports_settled(jc.url, args.runs):
            runs = [r for r in await read_runs_exact(jc.url) if r.tenant in weights]
            if len(runs) == args.runs and all(r.state.terminal for r in runs):
                break
        await asyncio.sleep(SAMPLE_S)
    else:
        raise TimeoutError(f"midnight: {args.runs} runs not ended within the deadline")
    successes = await _successes(jc)
    return _judge(runs, successes, weights, instant, capacity, args.seconds, stored_s, rss)


def _judge(runs: list[Any], successes: Counter[str], weights: dict[str, float], instant: datetime, capacity: int,
           seconds: float, stored_s: float, rss: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]]:
    def after(at: datetime | None) -> float:
        return (at - instant).total_seconds() if at is not None else float("inf")

    starts = sorted((after(r.started_at), r.tenant) for r in runs)
    offsets = [t for t, _ in starts]
    wave = offsets[:capacity]
    rest = offsets[capacity:]
    lag = [t - (k // capacity) * seconds for k, t in enumerate(offsets) if k >= capacity]
    decile = max(1, len(lag) // 10)
    # Fairness: from the first wave's end until the first tenant ran out of waiting runs
    last_start = {t: max(o for o, tenant in starts if tenant == t) for t in weights}
    window = (wave[-1], min(last_start.values()))
    in_window = Counter(tenant for o, tenant in starts if window[0] < o <= window[1])
    total_w, total_n = sum(weights.values()), sum(in_window.values())
    shares = {t: {"weight_share": round(w / total_w, 4),
                  "start_share": round(in_window[t] / total_n, 4) if total_n else None} for t, w in weights.items()}
    peak = {n: max(s[n] for s in rss) for n in rss[0] if n != "t_s"}
    result = {
        "runs": len(runs), "capacity": capacity, "jobs_stored_s": round(stored_s, 1),
        "recorded_before_instant": sum(1 for r in runs if after(r.created_at) < 0),
        "recorded_last_s": round(max(after(r.created_at) for r in runs), 2),
        "assigned_before_instant": sum(1 for r in runs if after(r.assigned_at) < 0),
        "first_wave_last_start_s": round(wave[-1], 2), "first_wave_p50_s": round(percentile(wave, 50), 2),
        "capacity_rate_per_s": round(capacity / seconds, 1),
        "rest_rate_per_s": round(len(rest) / (rest[-1] - wave[-1]), 1) if rest and rest[-1] > wave[-1] else None,
        "lag_behind_capacity_p50_s": round(percentile(lag, 50), 2) if lag else 0.0,
        "lag_behind_capacity_max_s": round(max(lag), 2) if lag else 0.0,
        "lag_first_decile_median_s": round(percentile(lag[:decile], 50), 2) if lag else 0.0,
        "lag_last_decile_median_s": round(percentile(lag[-decile:], 50), 2) if lag else 0.0,
        "last_start_s": round(offsets[-1], 2),
        "fairness_window_s": [round(window[0], 1), round(window[1], 1)], "tenant_shares": shares,
        "rss_peak_mib": peak, "rss_last_mib": {n: v for n, v in rss[-1].items() if n != "t_s"},
        "states": dict(Counter(r.state.value for r in runs)),
        "second_attempts": sum(1 for r in runs if r.attempt > 1),
        "succeeded_once": sum(1 for r in runs if successes[r.run_id] == 1),
        "succeeded_twice_or_more": sum(1 for r in runs if successes[r.run_id] > 1),
    }
    series = {"seconds": seconds, "capacity": capacity, "starts": [[round(o, 3), t] for o, t in starts],
              "rss": rss}
    return result, series

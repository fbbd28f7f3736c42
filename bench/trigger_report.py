"""Print the "Trigger" table of docs/benchmarks.md from bench/results/trigger_*.json (median [min–max])."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench.common import RESULTS


def _fig(stat: dict[str, float] | None, scale: float = 1.0, digits: int = 0) -> str:
    if not stat:
        return "–"
    med, lo, hi = (round(stat[k] * scale, digits) for k in ("median", "min", "max"))
    fmt = f"{{:.{digits}f}}"
    return f"{fmt.format(med)} [{fmt.format(lo)}–{fmt.format(hi)}]"


def _row(r: dict[str, Any]) -> str | None:
    load = r.get("machine", {}).get("load_avg_1m_at_end", "?")
    reps = next((v["n"] for v in r.values() if isinstance(v, dict) and "n" in v), "?")
    bench = str(r["bench"])
    if bench.startswith("trigger_start_delay"):
        what = (f"start delay, {r['schedules']:,} schedules "
                + ("due within one second" if r["scenario"] == "second" else "due at one instant")
                + f" (horizon {r['staging_horizon_s']:g} s)")
        figures = (f"p50 {_fig(r['p50_ms'])} ms, p99 {_fig(r['p99_ms'])} ms; recorded p99 "
                   f"{_fig(r['recorded_p99_ms'])} ms, assigned p99 {_fig(r['assigned_p99_ms'])} ms vs nominal")
    elif bench.startswith("trigger_takeover"):
        what = f"takeover after kill -9, {r['schedules']:,} schedules (lease TTL {r['lease_ttl_s']:g} s)"
        figures = (f"{_fig(r['takeover_s'], digits=2)} s; latest record past staging "
                   f"{_fig(r['latest_record_past_staging_s'], digits=2)} s; missed {_fig(r['missed'])}, "
                   f"off-grid {_fig(r['off_grid'])} of {_fig(r['occurrences_checked'])}")
    elif bench.startswith("trigger_memory"):
        what = f"trigger memory, {r['schedules']:,} schedules"
        figures = (f"{_fig(r['bytes_per_schedule'])} B/schedule ({_fig(r['rss_growth_mb'])} MiB); load "
                   f"{_fig(r['decode_and_load_us_per_schedule'])} µs/schedule")
    else:
        return None
    return f"| {what} | {figures} | {reps} | {load} |"


def main() -> None:
    rows = []
    for path in sorted(Path(RESULTS).glob("trigger_*.json")):
        row = _row(json.loads(path.read_text()))
        if row:
            rows.append(row)
    print("| measurement | median [min–max] | reps | load (2 CPUs) |")
    print("|---|---|---|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()

"""docs/images/longlife.png from a long-life series (bench/longlife.py): bytes per stream, RSS per process and
runs/s over time, with the retention window marked. What to look for: after the line, every stream's bytes and
every process's memory run flat while runs/s holds; a line still climbing there is history that does not age
out, or memory that grows with the runs ever made.

matplotlib comes with the `bench` extra (`pip install -e '.[bench]'`); nothing else in bench/ needs it.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from bench.common import ROOT
from bench.longlife import SERIES_DIR

IMAGE = ROOT / "docs" / "images" / "longlife.png"
STALL_IMAGE = ROOT / "docs" / "images" / "longlife_stall.png"
TOP_STREAMS = 8
"""Streams drawn: the largest at their peak (the rest stay near zero and only crowd the legend)."""
MiB = 1024 * 1024


def load(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(summary, samples) from a series file, or from a printed result holding its samples (`--series -`)."""
    data = json.loads(path.read_text())
    if "samples" in data and isinstance(data["samples"], list):
        return data["result"], data["samples"]
    return data, data["series_samples"]


def latest() -> Path:
    found = sorted(SERIES_DIR.glob("longlife-*.json"))
    if not found:
        raise SystemExit(f"no series in {SERIES_DIR}: run `python -m bench.longlife` first")
    return found[-1]


def plot(result: dict[str, Any], samples: list[dict[str, Any]], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    minutes = [p["t_s"] / 60 for p in samples]
    peak: dict[str, int] = {}
    for p in samples:
        for name, state in p["streams"].items():
            peak[name] = max(peak.get(name, 0), state.get("disk_bytes", 0), state["bytes"])
    shown = sorted((n for n in peak if peak[n]), key=lambda n: -peak[n])[:TOP_STREAMS]

    fig, (disk, rss, rate) = plt.subplots(3, 1, figsize=(11, 11), sharex=True)
    for name in shown:
        line, = disk.plot(minutes, [p["streams"].get(name, {}).get("bytes", 0) / MiB for p in samples], label=name)
        disk.plot(minutes, [p["streams"].get(name, {}).get("disk_bytes", 0) / MiB for p in samples],
                  color=line.get_color(), linestyle=":", linewidth=1)
    disk.set_ylabel("MiB (solid: stream bytes, dotted: files)")
    disk.set_title(f"{result.get('ledger', {}).get('occurrences', 0):,} runs, {result.get('jobs')} jobs every second, "
                   f"keep {result.get('keep_seconds', 0):.0f} s (floor {result.get('min_seconds', 0):.0f} s); "
                   f"lost {result.get('lost')}, recorded twice {result.get('recorded_twice')}")
    disk.legend(fontsize=8, ncol=2, loc="upper left")

    for name in samples[-1]["rss_bytes"]:
        rss.plot(minutes, [(p["rss_bytes"].get(name) or 0) / MiB for p in samples], label=name)
    rss.set_ylabel("RSS, MiB")
    rss.legend(fontsize=8, ncol=3, loc="upper left")

    rate.plot(minutes, [p["runs_per_s"] for p in samples], label="runs finished per second")
    rate.axhline(result.get("offered_runs_per_s", 0), color="grey", linestyle="--", linewidth=1, label="offered")
    refused = [sum(c["storage_full"] + c["unavailable"] for c in p["refusals"].values()) for p in samples]
    if any(refused):
        rate.twinx().plot(minutes, refused, color="red", label="refusals (cumulative)")
    rate.set_ylabel("runs/s")
    rate.set_xlabel("minutes since start")
    rate.legend(fontsize=8, loc="lower left")

    first = result.get("first_fire_t_s", 0) / 60
    kept = result.get("retention_from_t_s", 0) / 60
    stopped = result.get("stopped_t_s", 0) / 60
    for ax in (disk, rss, rate):
        ax.axvspan(first, kept, color="grey", alpha=0.12)
        ax.axvline(kept, color="grey", linewidth=1)
        if stopped:
            ax.axvline(stopped, color="grey", linewidth=1, linestyle="--")
        ax.grid(alpha=0.3)
    disk.text(kept, disk.get_ylim()[1] * 0.95, " retention window passed", fontsize=8, va="top")
    if stopped:
        disk.text(stopped, disk.get_ylim()[1] * 0.85, " jobs paused", fontsize=8, va="top")
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100)
    plt.close(fig)


def plot_stalls(series: list[Path], out: Path) -> None:
    """Runs finished per second and runs unfinished past their settle time, one line per series (`--stall` runs
    compared: before and after a change), the stall shaded: does the rate come back once the service does, and
    does the backlog go down?"""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (rate, behind) = plt.subplots(2, 1, figsize=(11, 7), sharex=True)
    for path in series:
        result, samples = load(path)
        minutes = [p["t_s"] / 60 for p in samples]
        line, = rate.plot(minutes, [p["runs_per_s"] for p in samples], label=path.stem)
        behind.plot(minutes, [p["unfinished_past_settle"] for p in samples], color=line.get_color(),
                    label=path.stem)
        stall = result.get("stall") or {}
        if stall.get("from_t_s") is not None and stall.get("until_t_s") is not None:
            for ax in (rate, behind):
                ax.axvspan(stall["from_t_s"] / 60, stall["until_t_s"] / 60, color="grey", alpha=0.08)
        rate.axhline(result.get("offered_runs_per_s", 0), color="grey", linestyle="--", linewidth=1)
        if result.get("stopped_t_s"):
            for ax in (rate, behind):
                ax.axvline(result["stopped_t_s"] / 60, color=line.get_color(), linewidth=1, linestyle=":")
    rate.set_ylabel("runs finished per second")
    rate.set_title("a service frozen (shaded), then let go on; dashed: offered rate, dotted: jobs paused")
    behind.set_ylabel("runs unfinished past their settle time")
    behind.set_xlabel("minutes since start")
    for ax in (rate, behind):
        ax.legend(fontsize=8, loc="upper left")
        ax.grid(alpha=0.3)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("series", nargs="*", type=Path, help="a series file (default: the newest in "
                        "bench/results/longlife/); with --stalls, the series to compare")
    parser.add_argument("--stalls", action="store_true", help="compare --stall runs (docs/images/longlife_stall.png)")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    if args.stalls:
        out = args.out or STALL_IMAGE
        plot_stalls(args.series or sorted(SERIES_DIR.glob("stall-*.json")), out)
    else:
        if len(args.series) > 1:
            parser.error("one series at a time (or --stalls to compare several)")
        out = args.out or IMAGE
        result, samples = load(args.series[0] if args.series else latest())
        plot(result, samples, out)
    print(out)


if __name__ == "__main__":
    main()

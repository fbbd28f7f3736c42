"""docs/images/scale_<scenario>.png from the series bench/scale.py wrote (bench/results/scale/), every
repetition drawn. What to look for:

- dead_hosts: the share of the lost runs re-dispatched against seconds after the loss; the curve must reach 1
  left of the TTL + 5 s line.
- steady_day: each run's submit -> started delay against when it was submitted (flat: picked up within
  seconds all day), and the server's writes/s by purpose (flat: nothing grows with the runs made).
- midnight: runs started against seconds after the instant, each tenant apart, beside what capacity allows (the
  fleet's slots, every run's length); and the trigger's, placement's, tracker's and server's memory.

matplotlib comes with the `bench` extra (`pip install -e '.[bench]'`).
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from bench.common import ROOT

SERIES = ROOT / "bench" / "results" / "scale"
IMAGES = ROOT / "docs" / "images"


def _reps(folder: Path, scenario: str) -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in sorted(folder.glob(f"{scenario}-*.json"))]


def dead_hosts(reps: list[dict[str, Any]], ax: Any) -> None:
    for k, rep in enumerate(reps):
        delays = rep["redispatched_s"]
        ax.step(delays, [(i + 1) / len(delays) for i in range(len(delays))], where="post", label=f"rep {k + 1}")
    ttl = reps[0]["ttl"]
    for x, label in ((ttl, "lease TTL"), (ttl + 5, "TTL + 5 s")):
        ax.axvline(x, linestyle=":", color="grey")
        ax.text(x, 0.05, f" {label}", color="grey")
    ax.set_xlabel("seconds after the agents were killed or frozen")
    ax.set_ylabel("share of their runs re-dispatched")
    ax.legend()


def steady_day(reps: list[dict[str, Any]], delay_ax: Any, writes_ax: Any) -> None:
    for k, rep in enumerate(reps):
        delay_ax.plot([d[0] / 60 for d in rep["delays"]], [d[1] for d in rep["delays"]], ".", markersize=1,
                      label=f"rep {k + 1}")
    delay_ax.axvline(reps[0]["warmup_s"] / 60, linestyle=":", color="grey")
    delay_ax.set_ylabel("submit -> started (s)")
    delay_ax.set_yscale("log")
    delay_ax.legend(markerscale=10)
    samples = reps[0]["samples"]
    for purpose in samples[0]["writes_per_s"]:
        writes_ax.plot([s["t_s"] / 60 for s in samples], [s["writes_per_s"][purpose] for s in samples],
                       label=purpose)
    writes_ax.set_ylabel("server writes/s (rep 1)")
    writes_ax.set_xlabel("minutes since the first submission")
    writes_ax.legend(fontsize="small", ncol=3)


def midnight(reps: list[dict[str, Any]], starts_ax: Any, rss_ax: Any) -> None:
    rep = reps[0]
    by_tenant: dict[str, list[float]] = defaultdict(list)
    for offset, tenant in rep["starts"]:
        by_tenant[tenant].append(offset)
    for tenant, offsets in sorted(by_tenant.items()):
        starts_ax.plot(offsets, range(1, len(offsets) + 1), label=f"{tenant} (weight share "
                       f"{rep['result']['tenant_shares'][tenant]['weight_share']:.2f})")
    everything = [o for o, _ in rep["starts"]]
    starts_ax.plot(everything, range(1, len(everything) + 1), color="black", label="all")
    capacity, seconds = rep["capacity"], rep["seconds"]
    waves = int(len(everything) / capacity) + 1
    starts_ax.step([w * seconds for w in range(waves + 1)],
                   [min(len(everything), (w + 1) * capacity) for w in range(waves + 1)], where="post",
                   linestyle=":", color="grey", label="capacity allows")
    starts_ax.set_xlabel("seconds after the instant")
    starts_ax.set_ylabel("runs started (rep 1)")
    starts_ax.legend(fontsize="small")
    for name in rep["rss"][0]:
        if name != "t_s":
            rss_ax.plot([s["t_s"] for s in rep["rss"]], [s[name] for s in rep["rss"]], label=name)
    rss_ax.axvline(0, linestyle=":", color="grey")
    rss_ax.set_xlabel("seconds after the instant")
    rss_ax.set_ylabel("RSS MiB (rep 1)")
    rss_ax.legend(fontsize="small")


def plot(scenario: str, reps: list[dict[str, Any]], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    first = reps[0]["result"]
    if scenario == "dead_hosts":
        fig, ax = plt.subplots(figsize=(9, 5))
        dead_hosts(reps, ax)
        title = f"{first['held_by_dead_or_frozen']:,} runs of killed and frozen agents, re-dispatched"
    elif scenario == "steady_day":
        fig, (top, bottom) = plt.subplots(2, 1, figsize=(10, 9), sharex=True)
        steady_day(reps, top, bottom)
        title = f"steady day: {first['runs']:,} runs among {first['schedules']:,} schedules"
    else:
        fig, (top, bottom) = plt.subplots(2, 1, figsize=(10, 9))
        midnight(reps, top, bottom)
        title = f"midnight: {first['runs']:,} runs due at one instant, {first['capacity']:,} slots"
    fig.suptitle(title)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=90)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--series", type=Path, default=SERIES)
    parser.add_argument("--out", type=Path, default=IMAGES)
    args = parser.parse_args()
    drawn = 0
    for scenario in ("dead_hosts", "steady_day", "midnight"):
        reps = _reps(args.series, scenario)
        if reps:
            plot(scenario, reps, args.out / f"scale_{scenario}.png")
            drawn += 1
    if not drawn:
        raise SystemExit(f"no series in {args.series}: run `python -m bench.scale` first")


if __name__ == "__main__":
    main()

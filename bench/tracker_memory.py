"""The tracker's memory per run it tracks: N runs recorded `scheduled` (a midnight herd waiting for a place).

In-process, no server, like `bench.placement_memory`: each run record is encoded to the bytes the `jc_runs` watch
delivers, decoded as the watch decodes it, and fed to the tracker's `Reconciler.on_record` (its index of the
non-terminal runs: what the sweeps, the listing, the deadlines and the wait timeouts read). Two forms, each in a
fresh subprocess: `whole`, every record kept as decoded (the index before it kept a waiting run in its form), and
`index`, as built (`core/reconcile.index_form`: a waiting run without its spec and history, its queue beside it).

The bytes are the Python heap's (tracemalloc); the RSS growth beside them is what the process asked of the system
meanwhile, from an untraced child. `sweep_seconds`: one reconciler sweep over them before any is due (they sit in
its quiet index), what a herd costs the leader's loop while it waits.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import subprocess
import sys
import time
import tracemalloc
from datetime import UTC, datetime
from typing import Any

from bench.common import emit, summary
from bench.placement_memory import _context, _encoded, _rss_bytes

MODES = ("whole", "index")


async def _measure(n: int, mode: str, trace: bool) -> dict[str, float]:
    import random

    import jetcron.core.reconcile as reconcile
    from jetcron.core.models import Run
    from jetcron.services.run_tracker.reconciler import Reconciler
    from jetcron.services.run_tracker.records import Records
    from jetcron.wire.codec import decode

    if mode == "whole":  # the index as it was: every record as the watch decoded it
        reconcile.index_form = lambda run: run
    now = datetime(2026, 1, 1, tzinfo=UTC)
    blobs = _encoded(n, now)
    ctx = _context("run_tracker")
    reconciler = Reconciler(ctx, Records(ctx, random.Random(0)))
    gc.collect()
    if trace:
        tracemalloc.start()
    traced = tracemalloc.get_traced_memory()[0]
    before = _rss_bytes()
    for revision, blob in enumerate(blobs, 1):
        run = decode(blob, Run)
        reconciler.on_record(run.run_id, run, revision)
    gc.collect()
    assert len(reconciler.active) == n
    assert (next(iter(reconciler.active.values())).spec is None) == (mode == "index")
    if trace:
        return {"bytes_per_run": (tracemalloc.get_traced_memory()[0] - traced) / n,
                "encoded_bytes_per_run": sum(map(len, blobs)) / n}
    out = {"bytes_per_run": (_rss_bytes() - before) / n}
    began = time.perf_counter()
    await reconciler.sweep(now)
    out["sweep_seconds"] = time.perf_counter() - began
    return out


def run(n: int, reps: int) -> dict[str, object]:
    got: dict[str, dict[str, list[float]]] = {mode: {"heap": [], "rss": []} for mode in MODES}
    sweeps: list[float] = []
    encoded = 0.0
    for _ in range(reps):
        for mode in MODES:
            for kind in ("heap", "rss"):
                out = subprocess.run([sys.executable, "-m", "bench.tracker_memory", "--child", str(n), "--mode",
                                      mode, *(["--trace"] if kind == "heap" else [])],
                                     capture_output=True, text=True, check=True)
                child = json.loads(out.stdout)
                got[mode][kind].append(child["bytes_per_run"])
                encoded = child.get("encoded_bytes_per_run", encoded)
                if "sweep_seconds" in child and mode == "index":
                    sweeps.append(child["sweep_seconds"])
    return {"bench": f"tracker_memory_{n}", "tracked_runs": n,
            "bytes_per_run": summary(got["index"]["heap"]), "rss_bytes_per_run": summary(got["index"]["rss"]),
            "whole_bytes_per_run": summary(got["whole"]["heap"]),
            "whole_rss_bytes_per_run": summary(got["whole"]["rss"]),
            "encoded_record_bytes": round(encoded, 1), "sweep_seconds": summary(sweeps),
            "what": "heap bytes (tracemalloc) the run tracker's index keeps per run recorded `scheduled` (waiting "
                    "for a place): as built (a waiting run without its spec and history) and with every record "
                    "whole (the earlier form); the RSS growth of each in an untraced process; one sweep over them "
                    "before any is due"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--mode", choices=MODES, default="index", help=argparse.SUPPRESS)
    parser.add_argument("--trace", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(asyncio.run(_measure(args.child, args.mode, args.trace))))
        return
    for n in args.sizes:
        emit(run(n, args.reps))


if __name__ == "__main__":
    main()

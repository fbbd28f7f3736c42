"""The tracker's memory per run it tracks: N runs recorded `scheduled` (a midnight herd waiting for a place).

In-process, no server, like `bench.placement_memory`: each run record is encoded to the bytes the `jc_runs` watch
delivers, decoded as the watch decodes it, and fed to the tracker's `Reconciler.on_record` (its index of the
non-terminal runs: what the sweeps, the listing, the deadlines and the wait timeouts read). Two forms, each in a
fresh subprocess: `whole`, every record kept as decoded (the index before it kept a waiting run in its form), and
`index`, as built (`jetcron.core.lifecycle.reconcile.index_form`: a waiting run without its spec and history,
its queue beside it).

The bytes are the Python heap's (tracemalloc); the RSS growth beside them is what the process asked of the system
meanwhile, from an untraced child. `sweep_seconds`: one reconciler sweep over them before any is due (they sit in
its quiet index), what a herd costs the leader's loop while it waits.
"""

from __future__ import annotations

import gc
import time
import tracemalloc
from datetime import UTC, datetime

from bench.common import summary
from bench.memory_common import children, herd_records, main, rss_bytes, service_context

MODES = ("whole", "index")


async def _measure(n: int, mode: str, trace: bool) -> dict[str, float]:
    import random

    import jetcron.core.lifecycle.reconcile as reconcile
    from jetcron.core.models import Run
    from jetcron.wire.codec import decode
    from jetcron_services.run_tracker.reconciler import Reconciler
    from jetcron_services.run_tracker.records import Records

    if mode == "whole":  # the index as it was: every record as the watch decoded it
        reconcile.index_form = lambda run: run
    now = datetime(2026, 1, 1, tzinfo=UTC)
    blobs = herd_records(n, now)
    ctx = service_context("run_tracker")
    reconciler = Reconciler(ctx, Records(ctx, random.Random(0)))
    gc.collect()
    if trace:
        tracemalloc.start()
    traced = tracemalloc.get_traced_memory()[0]
    before = rss_bytes()
    for revision, blob in enumerate(blobs, 1):
        run = decode(blob, Run)
        reconciler.on_record(run.run_id, run, revision)
    gc.collect()
    assert len(reconciler.active) == n
    assert (next(iter(reconciler.active.values())).spec is None) == (mode == "index")
    if trace:
        return {"bytes_per_run": (tracemalloc.get_traced_memory()[0] - traced) / n,
                "encoded_bytes_per_run": sum(map(len, blobs)) / n}
    out = {"bytes_per_run": (rss_bytes() - before) / n}
    began = time.perf_counter()
    await reconciler.sweep(now)
    out["sweep_seconds"] = time.perf_counter() - began
    return out


def run(n: int, reps: int) -> dict[str, object]:
    got: dict[str, dict[str, list[float]]] = {mode: {"heap": [], "rss": []} for mode in MODES}
    sweeps: list[float] = []
    encoded = 0.0
    for mode, kind, child in children("bench.tracker_memory", n, MODES, reps):
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


if __name__ == "__main__":
    main(__doc__, MODES, _measure, run)

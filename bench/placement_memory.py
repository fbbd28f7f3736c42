"""Placement memory per waiting run, and the leader's pass over them: N runs waiting for a place, no free slot.

In-process, no server, like `bench.trigger_memory`: each run record is encoded to the bytes the `jc_runs` watch
delivers, decoded as the watch decodes it, and fed to the same `View` and leader `Placer` the placement service
keeps (record hand-off: the view keeps the record and its revision, the leader holds it in its fair queue). The
records stand on the bus's in-memory twins, which the measured path never touches but for the waiting reasons
a pass writes (it only reads and queues).

The bytes are the Python heap's (tracemalloc: exact, what the objects kept hold); the RSS growth beside them is
what the process asked of the system meanwhile (it also counts the allocator's slack, and undercounts where freed
memory was reused). Two figures per size, each in a fresh subprocess so one measurement's heap does not flatter
the next: `records`, the decoded records alone in a dict; `placement`, the whole path, where the view keeps the
first RECORDS_KEPT records decoded and, of the rest, only the PlaceRun each stands for; `past`, the whole path with
no record kept, what each run past that window costs (docs/benchmarks.md, "The second limit").

`pass_seconds`: one leader pass over them with every slot taken, what a pass holds the event loop for (the
leader lease's renewal included), the median of 5 in each untraced `placement` process. With no slot free and
nothing preemptible the pass stops at the head of the queue once its waiting reasons are written.
`take_up_seconds`: a new leader taking every waiting record up (follow_records), and the longest it held the loop
meanwhile (`take_up_longest_hold_seconds`).
"""

from __future__ import annotations

import asyncio
import gc
import time
import tracemalloc
from datetime import UTC, datetime
from typing import Any

from bench.common import summary
from bench.memory_common import children, herd_records, main, rss_bytes, service_context

MODES = ("records", "placement", "past")
"""The decoded records alone; the whole path with the view's window of kept records (view.RECORDS_KEPT); the whole
path with no record kept (each run as one past the window)."""
PASSES = 5
"""Placement passes timed per child (the median is kept)."""


async def _measure(n: int, mode: str, trace: bool) -> dict[str, float]:
    from jetcron.core.models import AgentInfo, Run
    from jetcron.wire.codec import decode
    from jetcron_services.placement.service import Placer
    from jetcron_services.placement.view import View

    now = datetime(2026, 1, 1, tzinfo=UTC)
    blobs = herd_records(n, now)
    ctx = service_context("placement")
    view = View(ctx)
    if mode == "past":
        view.records_kept = 0
    # No free slot: every pass finds every run waiting (a herd behind a full fleet)
    view.upsert_agent(AgentInfo(agent_id="agent-1", cpu=4, memory_mb=4096, slots=0, heartbeat_at=now,
                                started_at=now))
    placer = Placer(ctx, view)
    await placer.follow_records()
    kept: dict[str, Run] = {}
    gc.collect()
    if trace:
        tracemalloc.start()  # its own record of each block costs RSS: the RSS figure comes from an untraced child
    traced = tracemalloc.get_traced_memory()[0]
    before = rss_bytes()
    for revision, blob in enumerate(blobs, 1):
        run = decode(blob, Run)
        if mode == "records":
            kept[run.run_id] = run
        else:
            view.on_record(run.run_id, run, revision)
    gc.collect()
    held = len(kept) if mode == "records" else sum(view.queue.waiting_by_tenant().values())
    assert held == n, f"{mode}: {held} of {n} runs held"
    grown = rss_bytes() - before
    if trace:
        return {"bytes_per_run": (tracemalloc.get_traced_memory()[0] - traced) / n,
                "encoded_bytes_per_run": sum(map(len, blobs)) / n}
    out = {"bytes_per_run": grown / n}
    if mode == "placement":
        # The leader's pass over them (in memory; the reasons it writes go to the records' twin): the first
        # pass writes its share of reasons, later ones find them shown
        passes = []
        for _ in range(PASSES):
            began = time.perf_counter()
            await placer.place_once()
            passes.append(time.perf_counter() - began)
        out["pass_seconds"] = sorted(passes)[len(passes) // 2]
        out.update(await _take_up(ctx, view))
    return out


async def _take_up(ctx: Any, view: Any) -> dict[str, float]:
    """A new leader taking up every waiting record: the seconds it takes, and the longest it holds the loop for
    (the turns a task beside it gets, as the leader lease's renewal would)."""
    from jetcron_services.placement.service import Placer

    gaps: list[float] = []

    async def beside() -> None:
        last = time.perf_counter()
        while True:
            await asyncio.sleep(0)
            now = time.perf_counter()
            gaps.append(now - last)
            last = now

    ticker = asyncio.ensure_future(beside())
    await asyncio.sleep(0)
    began = time.perf_counter()
    await Placer(ctx, view).follow_records()
    took = time.perf_counter() - began
    ticker.cancel()
    return {"take_up_seconds": took, "take_up_longest_hold_seconds": max(gaps, default=took)}


def run(n: int, reps: int) -> dict[str, object]:
    got: dict[str, dict[str, list[float]]] = {mode: {"heap": [], "rss": []} for mode in MODES}
    passes: list[float] = []
    take_up: list[float] = []
    longest: list[float] = []
    encoded = 0.0
    for mode, kind, child in children("bench.placement_memory", n, MODES, reps):
        got[mode][kind].append(child["bytes_per_run"])
        encoded = child.get("encoded_bytes_per_run", encoded)
        if "pass_seconds" in child:
            passes.append(child["pass_seconds"])
            take_up.append(child["take_up_seconds"])
            longest.append(child["take_up_longest_hold_seconds"])
    from jetcron_services.placement.view import RECORDS_KEPT

    return {"bench": f"placement_memory_{n}", "waiting_runs": n, "records_kept": RECORDS_KEPT,
            "bytes_per_waiting_run": summary(got["placement"]["heap"]),
            "bytes_per_run_past_window": summary(got["past"]["heap"]),
            "rss_bytes_per_run_past_window": summary(got["past"]["rss"]),
            "record_bytes_per_run": summary(got["records"]["heap"]),
            "rss_bytes_per_waiting_run": summary(got["placement"]["rss"]), "encoded_record_bytes": round(encoded, 1),
            "rss_bytes_per_record": summary(got["records"]["rss"]), "pass_seconds": summary(passes),
            "take_up_seconds": summary(take_up), "take_up_longest_hold_seconds": summary(longest),
            "what": "heap bytes (tracemalloc) placement's view and leader keep per run waiting for a place (record "
                    "hand-off): on average with the view's window of kept records, for a run past the window, "
                    "and the decoded record alone; the RSS growth of the same in an untraced process; the "
                    "seconds of one leader pass over them with no free slot (median of 5 per process); a new leader "
                    "taking them all up: its seconds and the longest it held the event loop"}


if __name__ == "__main__":
    main(__doc__, MODES, _measure, run)

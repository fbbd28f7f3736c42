"""Overlap policies end to end: an every-second job whose runs take 2.5 s, under each policy."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from datetime import datetime, timedelta
from itertools import combinations, pairwise
from pathlib import Path
from typing import Any

from harness import Services, clean_env, wait_for

from jetcron.core.ids import run_id
from jetcron.sdk.client import Client

SECOND = timedelta(seconds=1)
TERMINAL = ("succeeded", "failed", "dead", "cancelled", "skipped")
JETCRON = str(Path(sys.executable).parent / "jetcron")


def at(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


async def records(client: Client, job: str) -> list[dict[str, Any]]:
    page = await client.call("runs.list", {"job": job, "limit": 1000})
    return sorted(page["items"], key=lambda r: r["scheduled_at"])


async def run_for(client: Client, policy: str, seconds: float) -> list[dict[str, Any]]:
    """Create the slow every-second job under `policy`, let it run, pause it; the records once all ended."""
    spec = {"name": "slow", "command": ["sleep", "2.5"], "overlap": policy,
            "schedule": {"kind": "every", "every_seconds": 1}}
    await client.call("jobs.create", {"spec": spec})
    await asyncio.sleep(seconds)
    await client.call("jobs.pause", {"name": "slow"})

    async def ended() -> list[dict[str, Any]] | None:
        runs = await records(client, "slow")
        return runs if runs and all(r["state"] in TERMINAL for r in runs) else None

    result: list[dict[str, Any]] = await wait_for(ended, 25, what="every run to end")
    nominals = [at(r["scheduled_at"]) for r in result]
    # Whatever the policy, the ledger holds every occurrence once: a run, or a record saying why not
    assert [r["run_id"] for r in result] == [run_id("slow", n) for n in nominals]
    assert [b - a for a, b in pairwise(nominals)] == [SECOND] * (len(result) - 1)
    return result


def intervals(runs: list[dict[str, Any]]) -> list[tuple[datetime, datetime]]:
    return [(at(r["started_at"]), at(r["finished_at"])) for r in runs if r.get("started_at")]


def overlapping(runs: list[dict[str, Any]]) -> int:
    return sum(1 for (a0, a1), (b0, b1) in combinations(intervals(runs), 2) if a0 < b1 and b0 < a1)


async def test_allow_runs_every_occurrence_even_while_others_run(services: Services, client: Client) -> None:
    await services.start_system(agents=1)
    runs = await run_for(client, "allow", 5)
    assert {r["state"] for r in runs} == {"succeeded"}
    assert overlapping(runs) >= 3


async def test_skip_records_occurrences_due_while_a_run_is_active(services: Services, client: Client) -> None:
    await services.start_system(agents=1)
    runs = await run_for(client, "skip", 7)
    ran = [r for r in runs if r["state"] == "succeeded"]
    skipped = [r for r in runs if r["state"] == "skipped"]
    assert len(ran) + len(skipped) == len(runs)
    # 2.5 s runs every second: roughly one in three runs, the others say which run was still active
    assert len(ran) >= 2 and len(skipped) >= 2 * len(ran) - 2
    assert all(r["reason"].startswith("overlap: slow.") and "(policy skip)" in r["reason"] for r in skipped)
    assert overlapping(ran) == 0

    # And `jetcron runs list --job` shows the ledger: both the runs and the skipped records
    done = await asyncio.to_thread(subprocess.run, [JETCRON, "--nats", services.server.url, "runs", "list",
                                                    "--job", "slow", "-o", "json"], capture_output=True, text=True,
                                   timeout=30, env=clean_env())
    assert done.returncode == 0, done.stderr
    listed = json.loads(done.stdout)
    assert sorted(r["run_id"] for r in listed) == [r["run_id"] for r in runs]
    assert {r["state"] for r in listed} == {"succeeded", "skipped"}


async def test_buffer_one_holds_one_run_until_the_active_one_ends(services: Services, client: Client) -> None:
    await services.start_system(agents=1)
    runs = await run_for(client, "buffer_one", 7)
    ran = [r for r in runs if r["state"] == "succeeded"]
    skipped = [r for r in runs if r["state"] == "skipped"]
    assert len(ran) + len(skipped) == len(runs)
    # Never two at once; each buffered run started when the one it waited for had finished
    assert overlapping(ran) == 0
    buffered = [r for r in ran if r["after"]]
    assert len(buffered) >= 2
    by_id = {r["run_id"]: r for r in runs}
    for run in buffered:
        assert at(run["started_at"]) >= at(by_id[run["after"]]["finished_at"])
    # ...and back to back: runs follow each other within a reconciler sweep (0.5 s) and a dispatch
    gaps = [(b0 - a1) / SECOND for (_, a1), (b0, _) in pairwise(sorted(intervals(ran)))]
    assert max(gaps) < 1.5, gaps
    assert all("overlap:" in r["reason"] for r in skipped)


async def test_cancel_previous_cancels_the_active_run(services: Services, client: Client) -> None:
    await services.start_system(agents=1)
    runs = await run_for(client, "cancel_previous", 5)
    cancelled = [r for r in runs if r["state"] == "cancelled"]
    # Each occurrence supersedes the run before it; only the last one is left to finish
    assert len(cancelled) >= 3 and runs[-1]["state"] == "succeeded"
    for before, after in pairwise(runs):
        if before["state"] == "cancelled":
            assert before["reason"] == f"overlap: superseded by {after['run_id']}"
    assert {r["state"] for r in runs[:-1]} == {"cancelled"}

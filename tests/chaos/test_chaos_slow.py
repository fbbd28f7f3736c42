"""A slow server: every byte between each process (and the client submitting) and each NATS node delayed by a
fault proxy, so that every write takes 200 ms longer and then 2 s longer (the delay applies each way), each for a
minute under a steady load of chaos runs, on production lease and leader timings. No run twice, no attempt of an
agent that is alive lost to its lease, no request retried into a second job (the client retries with its
idempotency key, as the SDK's users are told to); and how throughput and latency degrade, against the minute
before, as figures."""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import time
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path

import pytest
from chaos_checks import all_terminal, chaos_job, check, missing_jobs, start_system, submit_all
from chaos_figures import Figures
from chaos_proxy import FaultProxy
from harness import Services

from jetcron.config import Settings
from jetcron.core.models import Run
from jetcron.sdk.client import Client

PHASES = (("baseline", 0.0, 30.0), ("write_200ms", 0.1, 60.0), ("write_2s", 1.0, 60.0))
"""(name, delay each way in seconds, how long)."""
RATE = 2.0
"""Chaos jobs submitted per second."""
PRODUCTION = {f"JETCRON_{name.upper()}": str(Settings.model_fields[name].default) for name in (
    "run_lease_ttl", "leader_lease_ttl", "heartbeat", "assign_stall", "redrive_after", "kill_grace", "drain_grace")}
"""The default timings, not the harness's fast ones: a 3 s lease is meant to be lost on a 4 s round trip."""


def _phase_at(at: float, starts: list[tuple[str, float]]) -> str:
    found = starts[0][0]
    for name, start in starts:
        if at >= start:
            found = name
    return found


@pytest.mark.chaos
@pytest.mark.timeout(420)
async def test_a_slow_server_under_load_doubles_nothing_and_loses_no_live_lease(
        cluster_services: Services, tmp_path: Path, figures: Figures) -> None:
    services, out = cluster_services, tmp_path
    nodes = services.server.nodes
    proxies = [await FaultProxy(n.port).start() for n in nodes]
    through = ",".join(p.url for p in proxies)
    names = ("api", "trigger-1", "placement", "run_tracker", "agent-1", "agent-2")
    client: Client | None = None
    try:
        # Given every process, and the client submitting, reaching the cluster only through the proxies
        await start_system(services, agent_env={n: {"JETCRON_NATS_URL": through, **PRODUCTION} for n in names})
        client = await Client.connect(through, timeout=30)
        submitted: list[tuple[str, float, float]] = []
        """(job, wall time submitted, seconds the create took, retries included)."""
        acked: list[str] = []
        starts: list[tuple[str, float]] = []

        async def submit(i: int) -> None:
            assert client is not None
            asked = time.time()
            name = f"slow-{i}"
            acked.extend(await submit_all(client, [chaos_job(name, out, first_sleep=0.5)], deadline=120))
            submitted.append((name, asked, time.time() - asked))

        # When a chaos job is submitted twice a second, and the delay goes from none to 200 ms to 2 s a write
        tasks: list[asyncio.Task[None]] = []
        i = 0
        for phase, delay, seconds in PHASES:
            for p in proxies:
                p.latency = delay
            starts.append((phase, time.time()))
            until = time.monotonic() + seconds
            while time.monotonic() < until:
                tasks.append(asyncio.create_task(submit(i)))
                i += 1
                await asyncio.sleep(1 / RATE)
        ended_at = time.time()
        for p in proxies:
            p.heal()
        await asyncio.gather(*tasks)

        # Then every acknowledged job ran once and succeeded, none twice, none missing
        runs, _ = await all_terminal(services.server.url, "slow-", len(acked), 180)
        verdict = check(runs, out, jobs=acked)
        verdict.missing = await missing_jobs(client, acked)
        figures["acked"], figures["lost"], figures["duplicates"] = len(acked), len(verdict.lost), \
            verdict.duplicate_count
        verdict.assert_ok()
        assert sorted(acked) == sorted(f"slow-{n}" for n in range(i))
        # And no attempt was lost to its lease: each run succeeded on its first attempt, no agent fenced one
        assert {k: [(a.attempt, a.outcome, a.reason) for a in r.history] for k, r in runs.items()
                if [a.outcome for a in r.history] != ["succeeded"]} == {}
        for agent in ("agent-1", "agent-2"):
            assert "attempt fenced" not in services[agent].output(), agent
        # (the figures: runs ended per second, and medians of the submit and of the run's time to end, by phase)
        _degradation(figures, runs.values(), submitted, starts, ended_at)
        figures["fault"] = "every write 200 ms, then 2 s, slower"
        figures["leadership_lost"] = sum(services[n].output().count("leadership lost") for n in names)
    finally:
        if client is not None:
            with contextlib.suppress(Exception):
                await client.close()
        for p in proxies:
            await p.close()


def _degradation(figures: Figures, runs: Iterable[Run], submitted: list[tuple[str, float, float]],
                 starts: list[tuple[str, float]], ended_at: float) -> None:
    bounds = {name: (start, nxt) for (name, start), (_, nxt) in
              zip(starts, [*starts[1:], ("end", ended_at)], strict=True)}
    runs = list(runs)
    by_job = {job: (at, took) for job, at, took in submitted}
    for phase, (start, end) in bounds.items():
        done = [r for r in runs if r.finished_at is not None and start <= r.finished_at.timestamp() < end]
        figures[f"{phase}_runs_per_s"] = round(len(done) / (end - start), 2)
        took = [t for at, t in by_job.values() if _phase_at(at, starts) == phase]
        figures[f"{phase}_submit_median_s"] = round(statistics.median(took), 3) if took else -1.0
        to_end = [(r.finished_at - r.created_at).total_seconds() for r in runs
                  if r.finished_at is not None and r.job in by_job and _phase_at(by_job[r.job][0], starts) == phase]
        figures[f"{phase}_run_median_s"] = round(statistics.median(to_end), 3) if to_end else -1.0
    figures["measured_at"] = datetime.now(UTC).isoformat(timespec="seconds")

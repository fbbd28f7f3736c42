"""kill -9 of each core service at its named fault point, mid-load, on a 3-node cluster; then it is restarted."""

from __future__ import annotations

import asyncio
import itertools
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from chaos_checks import (
    all_terminal,
    chaos_job,
    check,
    log_lines,
    missing_jobs,
    read_runs,
    redispatch_delays,
    start,
    start_system,
    submit_all,
)
from chaos_figures import Figures
from harness import Services, wait_for

from jetcron.core.models import RunState
from jetcron.sdk.client import Client


async def _killed_then_restarted(services: Services, name: str, module: str, restart_as: str) -> float:
    """Wait for the service to die at its fault point (exit 137, as kill -9), start a clean one; seconds it took."""
    code = await asyncio.to_thread(services[name].wait_exit, 40)
    assert code == 137, f"{name} exited with {code}, not at its fault point"
    died = time.monotonic()
    await start(services, restart_as, module, **({"JETCRON_AGENT_ID": restart_as} if module == "trigger" else {}))
    return died


@pytest.mark.chaos
async def test_trigger_killed_after_publish_before_cursor(cluster_services: Services, tmp_path: Path,
                                                          figures: Figures) -> None:
    # Given a trigger that dies (as kill -9) after its 3rd publish, before moving the job's cursor
    services, out = cluster_services, tmp_path
    await start_system(services, faults={"trigger-1": "trigger.after_publish=exit@3"})
    client = await Client.connect(services.server.url, timeout=15)
    try:
        # When a job fires every second (missed slots replayed: misfire all)
        acked = await submit_all(client, [chaos_job("tick", out, schedule={"kind": "every", "every_seconds": 1},
                                                    misfire={"kind": "all", "grace_seconds": 30})])
        died = await _killed_then_restarted(services, "trigger-1", "trigger", "trigger-2")
        await asyncio.sleep(5)
        await client.call("jobs.pause", {"name": "tick"})
        paused = time.monotonic()
        await asyncio.sleep(3)  # occurrences staged ahead before the pause still run
        count = len(await read_runs(services.server.url, "tick."))
        runs, recovery = await all_terminal(services.server.url, "tick.", count, 30)

        # Then every nominal second from the first to the last has exactly one run, and each succeeded once
        stamps = sorted(r.scheduled_at for r in runs.values())
        verdict = check(runs, out, jobs=["tick"], one_run_per_job=False)
        verdict.lost += [f"gap of {b - a} before {b}" for a, b in itertools.pairwise(stamps)
                         if b - a != timedelta(seconds=1)]
        verdict.missing = await missing_jobs(client, acked)
        figures["occurrences"], figures["lost"], figures["duplicates"] = len(runs), len(verdict.lost), \
            verdict.duplicate_count
        figures["restart_to_pause_s"] = paused - died
        figures["recovery_s"] = recovery
        verdict.assert_ok()
        assert len(runs) >= 6
    finally:
        await client.close()


@pytest.mark.chaos
async def test_placement_killed_after_dispatch_before_ack(cluster_services: Services, tmp_path: Path,
                                                          figures: Figures) -> None:
    # Given a placement leader that dies after publishing its 3rd assignment, before acking that PlaceRun
    services, out = cluster_services, tmp_path
    await start_system(services, faults={"placement": "placement.after_dispatch=exit@3"})
    client = await Client.connect(services.server.url, timeout=15)
    try:
        # When 8 runs are submitted
        jobs = [f"pl-{i}" for i in range(8)]
        acked = await submit_all(client, [chaos_job(j, out, first_sleep=0.5) for j in jobs])
        died = await _killed_then_restarted(services, "placement", "placement", "placement-b")

        # Then all 8 succeed once: the assigned one runs, the held ones are re-driven to the new leader
        runs, _ = await all_terminal(services.server.url, "pl-", 8, 45)
        verdict = check(runs, out, jobs=jobs)
        verdict.missing = await missing_jobs(client, acked)
        figures["runs"], figures["lost"], figures["duplicates"] = len(runs), len(verdict.lost), \
            verdict.duplicate_count
        figures["recovery_s"] = time.monotonic() - died
        verdict.assert_ok()
    finally:
        await client.close()


@pytest.mark.chaos
async def test_tracker_killed_after_receive_before_cas(cluster_services: Services, tmp_path: Path,
                                                       figures: Figures) -> None:
    # Given a run tracker that dies on its 4th event, after taking it and before writing the run record
    services, out = cluster_services, tmp_path
    await start_system(services, faults={"run_tracker": "tracker.after_receive=exit@4"})
    client = await Client.connect(services.server.url, timeout=15)
    try:
        jobs = [f"tr-{i}" for i in range(8)]
        acked = await submit_all(client, [chaos_job(j, out, first_sleep=0.5) for j in jobs])
        died = await _killed_then_restarted(services, "run_tracker", "run_tracker", "run_tracker-b")

        # Then every run ends succeeded with one effect: events in flight are redelivered (or their runs, whose
        # leases lapsed, re-run and find their effect committed), and stale reports change nothing
        runs, _ = await all_terminal(services.server.url, "tr-", 8, 50)
        verdict = check(runs, out, jobs=jobs)
        verdict.missing = await missing_jobs(client, acked)
        figures["runs"], figures["lost"], figures["duplicates"] = len(runs), len(verdict.lost), \
            verdict.duplicate_count
        figures["reruns"] = sum(len(r.history) - 1 for r in runs.values())
        figures["recovery_s"] = time.monotonic() - died
        verdict.assert_ok()
        assert all(r.state is RunState.SUCCEEDED for r in runs.values())
    finally:
        await client.close()


@pytest.mark.chaos
async def test_agent_killed_mid_run_is_redispatched_within_the_lease(cluster_services: Services, tmp_path: Path,
                                                                     figures: Figures) -> None:
    # Given 6 runs sleeping 15 s on agent-1
    services, out = cluster_services, tmp_path
    await start_system(services, agents=1)
    client = await Client.connect(services.server.url, timeout=15)
    try:
        jobs = [f"ak-{i}" for i in range(6)]
        acked = await submit_all(client, [chaos_job(j, out, first_sleep=15) for j in jobs])
        await wait_for(lambda: len(log_lines(out / "attempts.log")) == 6, 30, what="6 attempts on agent-1")
        await start(services, "agent-2", "agent", JETCRON_AGENT_ID="agent-2")

        # When agent-1 is killed with SIGKILL
        services["agent-1"].kill9()
        died = datetime.now(UTC)

        # Then each run is re-dispatched to agent-2 within lease TTL + 2 s and succeeds once
        runs, _ = await all_terminal(services.server.url, "ak-", 6, 40)
        verdict = check(runs, out, jobs=jobs)
        verdict.missing = await missing_jobs(client, acked)
        delays = redispatch_delays(runs, died)
        figures["runs"], figures["lost"], figures["duplicates"] = len(runs), len(verdict.lost), \
            verdict.duplicate_count
        figures["redispatch_max_s"], figures["redispatch_mean_s"] = max(delays), sum(delays) / len(delays)
        verdict.assert_ok()
        assert max(delays) <= 3.0 + 2.0, delays
    finally:
        await client.close()

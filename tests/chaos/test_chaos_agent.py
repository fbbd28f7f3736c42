"""Agent faults on a 3-node cluster: killed after its child exited but before it reported; paused past its lease
(SIGSTOP, SIGCONT); cut off from NATS through the fault proxy past its lease."""

from __future__ import annotations

import os
import signal
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from chaos_checks import (
    all_terminal,
    chaos_job,
    check,
    exit_time,
    log_lines,
    missing_jobs,
    read_runs,
    redispatch_delays,
    start,
    start_system,
    submit_all,
)
from chaos_figures import Figures
from chaos_proxy import FaultProxy
from harness import Services, pid_alive, wait_for

from jetcron.sdk.client import Client

LEASE_TTL = 3.0  # harness FAST_SETTINGS


async def test_agent_killed_after_child_exit_before_report(cluster_services: Services, tmp_path: Path,
                                                           figures: Figures) -> None:
    # Given agent-1, which dies (as kill -9) the moment its first child exits, running 4 runs
    services, out = cluster_services, tmp_path
    await start_system(services, agents=1, faults={"agent-1": "agent.after_exit=exit"})
    client = await Client.connect(services.server.url, timeout=15)
    try:
        jobs, gate = [f"ax-{i}" for i in range(4)], out / "agent-2-ready"
        acked = await submit_all(client, [chaos_job(j, out, first_sleep=1.0 + i * 0.5, gate=gate)
                                          for i, j in enumerate(jobs)])
        exited = exit_time(services, "agent-1")
        await wait_for(lambda: len(log_lines(out / "attempts.log")) == 4, 30, what="4 attempts on agent-1")
        # The children hold until agent-2 is ready: the re-dispatch delay then measures the lease, not a slow start.
        await start(services, "agent-2", "agent", JETCRON_AGENT_ID="agent-2")
        gate.touch()

        # When its first child exits (its effect committed) and the agent dies before reporting
        died = await exited
        assert services["agent-1"].proc is not None and services["agent-1"].proc.returncode == 137

        # Then every run ends succeeded on agent-2, within lease TTL + 2 s of the death for the re-dispatch
        runs, recovery = await all_terminal(services.server.url, "ax-", 4, 40)
        verdict = check(runs, out, jobs=jobs)
        verdict.missing = await missing_jobs(client, acked)
        delays = redispatch_delays(runs, died)
        figures["runs"], figures["lost"], figures["duplicates"] = len(runs), len(verdict.lost), verdict.duplicate_count
        figures["redispatch_max_s"] = max(delays)
        figures["redispatch_mean_s"] = sum(delays) / len(delays)
        figures["recovery_s"] = recovery
        verdict.assert_ok()
        assert len(delays) == 4, "each run's attempt 1 was lost with agent-1"
        assert max(delays) <= LEASE_TTL + 2.0, delays
        # And the run whose child had finished did not do its effect twice (once() saw it committed)
        assert len(log_lines(out / "effects.log")) == 4
    finally:
        await client.close()


@pytest.mark.chaos
async def test_agent_paused_past_its_lease_is_fenced_and_the_run_reruns(cluster_services: Services,
                                                                        tmp_path: Path, figures: Figures) -> None:
    # Given a run whose child sleeps 20 s on agent-1
    services, out = cluster_services, tmp_path
    await start_system(services, agents=1)
    client = await Client.connect(services.server.url, timeout=15)
    try:
        acked = await submit_all(client, [chaos_job("pause", out, first_sleep=20)])
        await wait_for(lambda: log_lines(out / "attempts.log"), 30, what="attempt 1 to run")
        child = int(log_lines(out / "attempts.log")[0][3])
        await start(services, "agent-2", "agent", JETCRON_AGENT_ID="agent-2")

        # When agent-1 is stopped (SIGSTOP) past its lease, then continued
        agent = services["agent-1"]
        os.kill(agent.pid, signal.SIGSTOP)
        stopped = datetime.now(UTC)
        await wait_for(lambda: len(log_lines(out / "attempts.log")) == 2, 20, what="attempt 2 elsewhere")
        rerun = time.monotonic()
        assert pid_alive(child), "the child ran on while its agent was stopped"
        os.kill(agent.pid, signal.SIGCONT)

        # Then agent-1 kills its child at once on waking (self-fencing: its lease is long gone)
        await wait_for(lambda: not pid_alive(child), 5, what="the paused agent's child to be killed")
        fenced = time.monotonic() - rerun

        # And the run succeeds once, on agent-2, with one effect
        runs, _ = await all_terminal(services.server.url, "pause", 1, 30)
        verdict = check(runs, out, jobs=["pause"])
        verdict.missing = await missing_jobs(client, acked)
        run = runs[next(iter(runs))]
        figures["lost"], figures["duplicates"] = len(verdict.lost), verdict.duplicate_count
        figures["redispatch_s"] = redispatch_delays(runs, stopped)[0]
        figures["child_killed_after_cont_s"] = fenced
        verdict.assert_ok()
        assert [(a.attempt, a.agent, a.outcome) for a in run.history] == [
            (1, "agent-1", "lost"), (2, "agent-2", "succeeded")]
        assert agent.alive, "the agent itself survives and carries on"
    finally:
        await client.close()


@pytest.mark.chaos
async def test_agent_partitioned_past_its_lease_is_fenced_and_the_run_reruns(
        cluster_services: Services, tmp_path: Path, figures: Figures) -> None:
    # Given agent-1 connected to NATS only through the fault proxy, running a 20 s child
    services, out = cluster_services, tmp_path
    proxy = await FaultProxy(services.server.nodes[0].port).start()
    try:
        await start_system(services, agents=0)
        await start(services, "agent-1", "agent", JETCRON_AGENT_ID="agent-1", JETCRON_NATS_URL=proxy.url)
        client = await Client.connect(services.server.url, timeout=15)
        try:
            acked = await submit_all(client, [chaos_job("cut", out, first_sleep=20)])
            await wait_for(lambda: log_lines(out / "attempts.log"), 30, what="attempt 1 to run")
            child = int(log_lines(out / "attempts.log")[0][3])
            await start(services, "agent-2", "agent", JETCRON_AGENT_ID="agent-2")

            # When the proxy blackholes agent-1 (a partition) for longer than the lease
            proxy.blackhole()
            cut = datetime.now(UTC)
            cut_at = time.monotonic()

            # Then agent-1 kills its child by itself before the lease could be taken over
            await wait_for(lambda: not pid_alive(child), LEASE_TTL + 3, what="the cut-off agent to fence")
            fenced = time.monotonic() - cut_at
            # And the run is re-run on agent-2
            await wait_for(lambda: len(log_lines(out / "attempts.log")) == 2, 20, what="attempt 2 elsewhere")
            proxy.heal()

            runs, _ = await all_terminal(services.server.url, "cut", 1, 30)
            verdict = check(runs, out, jobs=["cut"])
            verdict.missing = await missing_jobs(client, acked)
            run = runs[next(iter(runs))]
            figures["lost"], figures["duplicates"] = len(verdict.lost), verdict.duplicate_count
            figures["child_killed_after_cut_s"] = fenced
            figures["redispatch_s"] = redispatch_delays(runs, cut)[0]
            verdict.assert_ok()
            assert fenced < LEASE_TTL, "the child died before the server could expire the lease"
            assert [(a.attempt, a.agent, a.outcome) for a in run.history] == [
                (1, "agent-1", "lost"), (2, "agent-2", "succeeded")]
            # And once agent-1 is heard again and has sent every report it held, its late ones changed nothing
            # (a partition shorter than the pings' bound leaves its connection up: the held bytes flow on)
            back = datetime.now(UTC)

            async def flushed() -> bool:
                info = next((a for a in (await client.agents.list()).items if a.agent_id == "agent-1"), None)
                return info is not None and info.heartbeat_at > back and info.pending_reports == 0

            await wait_for(flushed, 30, what="agent-1's reports to be sent")
            again = (await read_runs(services.server.url, "cut"))[next(iter(runs))]
            assert (again.state, again.attempt, again.history) == (run.state, run.attempt, run.history)
        finally:
            await client.close()
    finally:
        await proxy.close()

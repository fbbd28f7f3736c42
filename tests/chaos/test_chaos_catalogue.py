"""The NATS fault catalogue on a 3-node cluster, each under a load of chaos runs: a node paused past a leader
election, a rolling restart of all three nodes, a node wiped and rejoining, a service cut off from the cluster,
connections reset mid-request, latency with jitter on every connection, and a host clock 30 s ahead or behind.
For each, the invariants of chaos_checks.check and the recovery time (from the end of the fault until every
run ended) go to build/chaos-figures.jsonl, from which docs/guarantees.md's table is generated."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from chaos_checks import leader_of, loaded, log_lines, new_leader, start_system
from chaos_figures import Figures
from chaos_proxy import FaultProxy
from harness import Services, wait_for

from jetcron.bus.server import ServerNode, start_node, stop_node, wait_healthy
from jetcron.wire import subjects as s


def _last_seq(node: ServerNode, stream: str) -> int:
    """The last sequence of `stream` as `node` itself stores it (its monitor port)."""
    import json

    url = f"http://127.0.0.1:{node.monitor_port}/jsz?accounts=true&streams=true"
    with urllib.request.urlopen(url, timeout=5) as resp:
        jsz: dict[str, Any] = json.load(resp)
    for account in jsz.get("account_details") or []:
        for detail in account.get("stream_detail") or []:
            if detail["name"] == stream:
                return int(detail["state"]["last_seq"])
    return -1


@pytest.mark.chaos
async def test_a_node_paused_past_a_leader_election(cluster_services: Services, tmp_path: Path,
                                                    figures: Figures) -> None:
    services = cluster_services
    await start_system(services)
    async with loaded(services, tmp_path, "pz", figures) as settle:
        # When the node leading the runs bucket is stopped (SIGSTOP) for 8 s, past the election of another
        nodes = services.server.nodes
        leader = await leader_of(nodes, f"KV_{s.BUCKET_RUNS}")
        victim = next(n for n in nodes if n.name == leader)
        assert victim.process is not None
        os.kill(victim.process.pid, signal.SIGSTOP)
        try:
            others = [n for n in nodes if n is not victim]
            elected = await wait_for(lambda: new_leader(others, victim.name), 20, what="a new runs leader")
            await asyncio.sleep(8)
        finally:
            os.kill(victim.process.pid, signal.SIGCONT)
        figures["fault"], figures["victim"], figures["new_leader"] = "node paused past an election", victim.name, \
            elected
        # Then every run succeeds once, the paused node's late writes notwithstanding
        await settle()


@pytest.mark.chaos
@pytest.mark.timeout(240)
async def test_a_rolling_restart_of_every_node_under_load(cluster_services: Services, tmp_path: Path,
                                                         figures: Figures) -> None:
    services = cluster_services
    await start_system(services)
    async with loaded(services, tmp_path, "rr", figures, n=24, deadline=120) as settle:
        # When each node in turn is stopped (SIGTERM), restarted, and waited for until its streams are current
        started = time.monotonic()
        for node in services.server.nodes:
            stop_node(node)
            start_node(node)
            await asyncio.to_thread(wait_healthy, node, 60, js_only=False)
        figures["fault"], figures["restart_s"] = "rolling restart of all nodes", time.monotonic() - started
        await settle()


@pytest.mark.chaos
@pytest.mark.timeout(240)
async def test_a_node_wiped_and_rejoining(cluster_services: Services, tmp_path: Path, figures: Figures) -> None:
    services = cluster_services
    await start_system(services)
    async with loaded(services, tmp_path, "wp", figures) as settle:
        # When a node that leads nothing of the runs bucket is killed, its whole store deleted, and it restarts
        nodes = services.server.nodes
        leader = await leader_of(nodes, f"KV_{s.BUCKET_RUNS}")
        victim = next(n for n in nodes if n.name != leader)
        stop_node(victim, kill=True)
        shutil.rmtree(victim.store_dir)
        wiped = time.monotonic()
        start_node(victim)
        await asyncio.to_thread(wait_healthy, victim, 60, js_only=False)
        await settle()

        # Then it has caught up from its peers: it stores the jobs and runs the others store
        def caught_up() -> bool:
            stores = {n.name: (_last_seq(n, f"KV_{s.BUCKET_JOBS}"), _last_seq(n, f"KV_{s.BUCKET_RUNS}"))
                      for n in nodes}
            return len(set(stores.values())) == 1

        await wait_for(lambda: asyncio.to_thread(caught_up), 60, what="the wiped node to catch up")
        figures["fault"], figures["victim"] = "node wiped and rejoining", victim.name
        figures["catch_up_s"] = time.monotonic() - wiped


@pytest.mark.chaos
async def test_a_service_cut_off_from_the_cluster(cluster_services: Services, tmp_path: Path,
                                                  figures: Figures) -> None:
    services = cluster_services
    proxies = [await FaultProxy(n.port).start() for n in services.server.nodes]
    try:
        # Given the run tracker reaching the cluster only through fault proxies
        through = ",".join(p.url for p in proxies)
        await start_system(services, agent_env={"run_tracker": {"JETCRON_NATS_URL": through}})
        async with loaded(services, tmp_path, "cut", figures) as settle:
            # When it is cut off from every node (a partition: nothing passes) for 10 s while runs end
            for p in proxies:
                p.blackhole()
            await asyncio.sleep(10)
            for p in proxies:
                p.heal()
            figures["fault"], figures["cut_s"] = "run tracker cut off from the cluster", 10
            # Then the reports it missed are consumed when it is back, and every run succeeds once
            await settle()
    finally:
        for p in proxies:
            await p.close()


@pytest.mark.chaos
async def test_connections_reset_mid_request(cluster_services: Services, tmp_path: Path, figures: Figures) -> None:
    services = cluster_services
    proxies = [await FaultProxy(n.port).start() for n in services.server.nodes]
    try:
        # Given every service and agent connected through fault proxies
        through = ",".join(p.url for p in proxies)
        names = ("api", "trigger-1", "placement", "run_tracker", "agent-1", "agent-2")
        await start_system(services, agent_env={n: {"JETCRON_NATS_URL": through} for n in names})
        async with loaded(services, tmp_path, "rst", figures) as settle:
            # When every open connection is reset (RST) once a second for 10 s
            resets = 0
            for _ in range(10):
                resets += sum(p.reset() for p in proxies)
                await asyncio.sleep(1)
            figures["fault"], figures["connections_reset"] = "connections reset mid-request", resets
            await settle()
    finally:
        for p in proxies:
            await p.close()


@pytest.mark.chaos
@pytest.mark.timeout(240)
async def test_latency_with_jitter_on_every_connection(cluster_services: Services, tmp_path: Path,
                                                       figures: Figures) -> None:
    services = cluster_services
    proxies = [await FaultProxy(n.port).start() for n in services.server.nodes]
    try:
        # Given every service and agent connected through proxies adding 100 ms +- 50 ms each way
        for p in proxies:
            p.latency, p.jitter = 0.1, 0.05
        through = ",".join(p.url for p in proxies)
        names = ("api", "trigger-1", "placement", "run_tracker", "agent-1", "agent-2")
        await start_system(services, agent_env={n: {"JETCRON_NATS_URL": through} for n in names})
        async with loaded(services, tmp_path, "lat", figures) as settle:
            figures["fault"] = "latency 100 ms +- 50 ms on every connection"
            # Then every run succeeds once, only later
            await settle()
    finally:
        for p in proxies:
            await p.close()


@pytest.mark.chaos
@pytest.mark.parametrize("skew", [30, -30], ids=["ahead", "behind"])
async def test_a_host_clock_30s_off(cluster_services: Services, tmp_path: Path, figures: Figures,
                                    skew: int) -> None:
    services = cluster_services
    # Given the run tracker and placement on hosts whose clocks are 30 s off (the clock seam), and agent-1 killed
    # mid-run, so that the tracker's judgement of its lapsed lease is what brings the runs back
    off = {"JETCRON_CLOCK_SKEW": str(skew)}
    await start_system(services, agent_env={"run_tracker": off, "placement": off})
    async with loaded(services, tmp_path, "clk", figures, first_sleep=5.0) as settle:
        await wait_for(lambda: len(log_lines(tmp_path / "attempts.log")) >= 4, 30, what="runs to start")
        services["agent-1"].kill9()
        figures["fault"] = f"run tracker and placement with the clock {abs(skew)} s {'ahead' if skew > 0 else 'behind'}"
        # Then every run succeeds once (a clock ahead delays the re-dispatched attempts by as much: docs/guarantees.md)
        await settle()

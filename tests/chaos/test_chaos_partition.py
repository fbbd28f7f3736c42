"""A network partition inside the NATS cluster: one node cut off from the other two (every route between them
through a fault proxy, blackholed), under a load of chaos runs, with services on the minority side and on the
majority side. The invariants of chaos_checks.check hold, and the recovery after the heal is measured."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from pathlib import Path

import nats
import pytest
from chaos_checks import leader_of, loaded, new_leader, start_system
from chaos_figures import Figures
from chaos_proxy import FaultProxy
from harness import Services, add_failure_report, wait_for

from jetcron.bus.server import EmbeddedNats, free_port, start_node, stop_node, wait_healthy, write_config
from jetcron.bus.topology import ensure_topology
from jetcron.wire import subjects as s

NODES = 3
PARTITION_S = 10


@pytest.fixture
async def route_links() -> AsyncIterator[dict[tuple[int, int], FaultProxy]]:
    """A fault proxy for each ordered pair of nodes (a, b): a's route to b goes through it."""
    links = {(a, b): await FaultProxy(0, parse_frames=False).start()
             for a in range(NODES) for b in range(NODES) if a != b}
    yield links
    for proxy in links.values():
        await proxy.close()


@pytest.fixture
async def nats_cluster(request: pytest.FixtureRequest, tmp_path: Path,
                       route_links: dict[tuple[int, int], FaultProxy]) -> AsyncIterator[EmbeddedNats]:
    """The 3-node cluster of tests/conftest.py, but every route through `route_links`. Its nodes advertise a
    closed port for routes, so no gossiped route goes around the proxies. Async: the proxies run on this loop,
    and the nodes cannot form a cluster unless it turns while they start."""
    server = EmbeddedNats(tmp_path / "nats", nodes=NODES)
    closed = free_port()
    for (_, b), proxy in route_links.items():
        proxy.upstream = ("127.0.0.1", server.nodes[b].cluster_port or 0)
    for a, node in enumerate(server.nodes):
        write_config(node, sync_always=True, routes=[route_links[(a, b)].port for b in range(NODES) if b != a],
                     route_advertise=f"127.0.0.1:{closed}")
    add_failure_report(request, "nats-server log", lambda: "\n".join(
        n.log_path.read_text(errors="replace")[-4000:] for n in server.nodes if n.log_path))
    try:
        for node in server.nodes:
            start_node(node)
        for node in server.nodes:
            await asyncio.to_thread(wait_healthy, node, 30, js_only=False)
        yield server
    finally:
        for node in server.nodes:
            with contextlib.suppress(Exception):
                stop_node(node)


def _cut(links: dict[tuple[int, int], FaultProxy], victim: int) -> None:
    for (a, b), proxy in links.items():
        if victim in (a, b):
            proxy.blackhole()


def _heal(links: dict[tuple[int, int], FaultProxy]) -> None:
    for proxy in links.values():
        proxy.heal()


@pytest.mark.chaos
@pytest.mark.timeout(240)
@pytest.mark.parametrize("side", ["minority", "majority"])
async def test_a_node_partitioned_from_the_other_two(cluster_services: Services, route_links: dict[
        tuple[int, int], FaultProxy], tmp_path: Path, figures: Figures, side: str) -> None:
    services = cluster_services
    nodes = services.server.nodes
    # Given the node leading the runs bucket as the one to be cut off, and the services pinned to nodes:
    # "minority": the api, trigger, placement and tracker on the node to be cut off, the agents on the others;
    # "majority": those services on the other two nodes, agent-1 on the node to be cut off, agent-2 on the others
    nc = await nats.connect([n.url for n in nodes])
    try:
        await ensure_topology(nc.jetstream(timeout=3), replicas=NODES)
    finally:
        await nc.close()
    leader = await leader_of(nodes, f"KV_{s.BUCKET_RUNS}")
    victim = next(i for i, n in enumerate(nodes) if n.name == leader)
    cut_off = nodes[victim].url
    rest = ",".join(n.url for i, n in enumerate(nodes) if i != victim)
    core = ("api", "trigger-1", "placement", "run_tracker")
    where = {name: cut_off if side == "minority" else rest for name in core}
    where |= {"agent-1": rest if side == "minority" else cut_off, "agent-2": rest}
    await start_system(services, agent_env={name: {"JETCRON_NATS_URL": url} for name, url in where.items()})
    async with loaded(services, tmp_path, f"part{side[:3]}", figures) as settle:
        # When every route between it and the other two carries nothing for 10 s
        _cut(route_links, victim)
        cut = time.monotonic()
        try:
            others = [n for i, n in enumerate(nodes) if i != victim]
            # Then the majority elects another leader for the runs bucket while it is cut off
            elected = await wait_for(lambda: new_leader(others, leader), 20, what="a leader on the majority side")
            figures["election_s"] = time.monotonic() - cut
            await asyncio.sleep(max(0.0, PARTITION_S - (time.monotonic() - cut)))
        finally:
            _heal(route_links)
        figures["fault"], figures["side"] = "a node partitioned from the other two", side
        figures["victim"], figures["new_leader"] = leader, elected
        # And once healed, every acknowledged job's run succeeds once
        await settle()

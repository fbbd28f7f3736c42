"""The fixture cluster's ports: every listener of every node gets its own."""

from __future__ import annotations

from pathlib import Path

from jetcron.bus.server import EmbeddedNats, free_ports


def test_free_ports_are_distinct_even_when_many_are_asked_for() -> None:
    ports = free_ports(64)
    assert len(set(ports)) == 64


def test_a_three_node_cluster_never_shares_a_port_between_listeners(tmp_path: Path) -> None:
    # CI once saw a node given one port for clients and monitor: it died with "address already in use".
    for attempt in range(20):
        cluster = EmbeddedNats(tmp_path / str(attempt), nodes=3)
        ports = [p for n in cluster.nodes for p in (n.port, n.monitor_port, n.cluster_port)]
        assert len(set(ports)) == 9, ports
        text = cluster.nodes[2].config_path.read_text()
        assert f"listen: 127.0.0.1:{cluster.nodes[2].port}" in text
        assert f"http: 127.0.0.1:{cluster.nodes[2].monitor_port}" in text

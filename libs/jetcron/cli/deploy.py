"""`jetcron deploy init`: what a multi-host jetcron needs that is secret or made per cluster (docs/deploy.md).

One folder, mounted read-only into every container at /etc/jetcron (compose), turned into Secrets and a
ConfigMap (Kubernetes), or copied to each VM: the NATS operator and account, one credential per service and
agent, the admin's, the secrets key and the job signing key; a CA and one server certificate for every NATS
node; each node's nats-server config. A second run keeps what is there and adds only what is missing.
"""

from __future__ import annotations

import base64
import datetime
import json
import os
from pathlib import Path

import typer

from jetcron.auth.certs import TlsFiles, issue, make_ca
from jetcron.auth.keyfile import ensure_key_file
from jetcron.auth.local import SERVICE_ROLES, LocalCreds
from jetcron.auth.roles import Role
from jetcron.bus.server import node_config
from jetcron.core.ids import AGENT_ID_RE

app = typer.Typer(no_args_is_help=True)
MOUNT = Path("/etc/jetcron")
"""Where the folder is mounted in a container: the node configs name their files there."""


def container_tls(mount: Path = MOUNT) -> TlsFiles:
    return TlsFiles(ca=mount / "tls" / "ca.pem", cert=mount / "tls" / "server.pem",
                    key=mount / "tls" / "server-key.pem")


@app.command("init")
def init(directory: Path = typer.Option(..., "--dir", help="where to write (kept if there; keys mode 0600)"),
         nodes: int = typer.Option(3, "--nodes", min=1, max=9, help="NATS nodes (1 or an odd number)"),
         agents: int = typer.Option(2, "--agents", min=0, help="agent credentials agent-1..agent-N"),
         host: list[str] = typer.Option([], "--host", help="each node's host name, in order (default nats-1..N)"),
         extra_host: list[str] = typer.Option([], "--tls-name", help="another name clients reach NATS by "
                                              "(a load balancer, localhost for port forwards; repeat)"),
         tls: bool = typer.Option(True, "--tls/--no-tls", help="TLS on client connections and routes"),
         agent_ids: list[str] = typer.Option([], "--agent", help="an agent id to mint a credential for (a host or "
                                             "Kubernetes node name; repeat)"),
         kubernetes: str | None = typer.Option(None, "--kubernetes", metavar="NAMESPACE",
                                               help="also write kubernetes.yaml: the Secrets and the NATS ConfigMap "
                                               "of a StatefulSet jetcron-nats in NAMESPACE"),
         owner: int | None = typer.Option(None, "--owner", help="chown what containers mount to this uid (the "
                                          "image runs as 10001; needs root): keys stay mode 0600")) -> None:
    """Keys, credentials, certificates and nats-server configs for a cluster of NODES (compose, VMs)."""
    if nodes % 2 == 0:
        typer.echo(f"usage error: --nodes {nodes}: JetStream needs a majority: use 1, 3 or 5 nodes", err=True)
        raise typer.Exit(2)
    names = host or (k8s_nodes(nodes, kubernetes) if kubernetes else [f"nats-{i}" for i in range(1, nodes + 1)])
    if len(names) != nodes:
        typer.echo(f"usage error: {len(names)} --host names for {nodes} nodes", err=True)
        raise typer.Exit(2)
    creds = LocalCreds.ensure(directory / "auth", agents)
    ensure_key_file(directory / "auth" / "secrets.key")
    for agent_id in agent_ids:
        if not AGENT_ID_RE.fullmatch(agent_id):
            typer.echo(f"usage error: --agent {agent_id!r}: 1-63 letters, digits, '-' or '_'", err=True)
            raise typer.Exit(2)
        if not creds.path(agent_id).exists():
            creds.authority.write_creds(creds.path(agent_id), Role.AGENT, agent_id=agent_id)
    now = datetime.datetime.now(datetime.UTC)
    if tls:
        make_ca(directory / "tls", now)
        if not (directory / "tls" / "server.pem").exists():
            client_names = [f"jetcron-nats.{kubernetes}.svc", f"jetcron-nats.{kubernetes}", "jetcron-nats"] \
                if kubernetes else []
            issue(directory / "tls", "server", [*names, *client_names, *extra_host, "localhost", "127.0.0.1"], now)
    (directory / "nats").mkdir(parents=True, exist_ok=True)
    auth = creds.authority.server_config(resolver_dir="/data/resolver")
    for name in names:
        (directory / "nats" / f"{name}.conf").write_text(
            node_config(name, peers=names if nodes > 1 else [], auth=auth, tls=container_tls() if tls else None))
    if kubernetes is not None:
        manifests = directory / "kubernetes.yaml"
        manifests.write_text(kubernetes_objects(directory, creds, nodes, kubernetes, tls))
        manifests.chmod(0o600)  # every credential and key of the cluster, base64: as secret as auth/ itself
    if owner is not None:
        for path in (directory / "auth" / "creds", directory / "tls", directory / "nats"):
            for item in [path, *path.rglob("*")] if path.exists() else []:
                os.chown(item, owner, -1)
        for name in ("secrets.key", "job-signing.seed"):
            os.chown(directory / "auth" / name, owner, -1)
    typer.echo(f"jetcron deploy: {directory}: credentials for {', '.join(SERVICE_ROLES)}, "
               f"{agents} agents and the admin ({directory / 'auth' / 'admin.creds'}); "
               f"{'a CA and a server certificate for ' + ', '.join(names) if tls else 'no TLS'}; "
               f"nats-server configs in {directory / 'nats'}")


def k8s_nodes(nodes: int, namespace: str) -> list[str]:
    """The StatefulSet's pods by their stable names (deploy/kubernetes/base/nats.yaml)."""
    return [f"jetcron-nats-{i}.jetcron-nats-cluster.{namespace}.svc" for i in range(nodes)]


def kubernetes_objects(directory: Path, creds: LocalCreds, nodes: int, namespace: str, tls: bool) -> str:
    """The Secrets (service and agent credentials, keys, TLS) and the NATS ConfigMap the manifests of
    deploy/kubernetes refer to, as one YAML stream (apply it, or list it in an overlay)."""
    peers = k8s_nodes(nodes, namespace)
    config = node_config("$POD_NAME", peers=peers if nodes > 1 else [], tls=container_tls() if tls else None,
                         auth=creds.authority.server_config(resolver_dir="/data/resolver"))
    service_files = {f"{process}.creds": creds.path(process) for process in SERVICE_ROLES}
    service_files["secrets.key"] = directory / "auth" / "secrets.key"
    service_files["job-signing.seed"] = creds.authority.job_minter()
    agent_files = {p.name: p for p in sorted((directory / "auth" / "creds").glob("*.creds"))
                   if p.stem not in SERVICE_ROLES}
    tls_files = {name: directory / "tls" / name for name in ("ca.pem", "server.pem", "server-key.pem")} if tls else {}

    def secret(name: str, files: dict[str, Path]) -> dict[str, object]:
        data = {key: base64.b64encode(path.read_bytes()).decode() for key, path in files.items()}
        return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name}, "type": "Opaque", "data": data}

    objects: list[dict[str, object]] = [
        secret("jetcron-creds", service_files), secret("jetcron-agent-creds", agent_files),
        secret("jetcron-nats-tls", tls_files),
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "jetcron-nats-config"},
         "data": {"nats.conf": config}}]
    header = "# Made by `jetcron deploy init --kubernetes`: credentials and keys. Keep it out of version control.\n"
    return header + "---\n".join(json.dumps(o, indent=1) + "\n" for o in objects)

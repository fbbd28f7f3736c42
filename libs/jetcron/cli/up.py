"""`jetcron up`: the embedded nats-server, every service and N local agents as child processes."""

from __future__ import annotations

import asyncio
import fcntl
import grp
import ipaddress
import os
import pwd
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Collection, Mapping
from pathlib import Path
from typing import IO

import typer

from jetcron.auth.certs import DEFAULT_HOSTS, ensure_local_tls
from jetcron.auth.local import LocalCreds
from jetcron.bus.connect import Identity
from jetcron.bus.server import EmbeddedNats
from jetcron.cli.identity import write_context
from jetcron.config import Settings
from jetcron.core.host.uid_pool import LOCAL_RANGES, format_uid_range, local_range
from jetcron.lifeline import ends_with
from jetcron.ops.overview import not_ready
from jetcron.sdk.client import Client

SERVICES = ("api", "trigger", "placement", "run_tracker", "gateway", "notifier")
READY_WITHIN = 90.0
"""Seconds `up` waits for every service and agent to answer before it names those that do not (they may still)."""
READY_POLL = 0.5


class Supervisor:
    """Children in their own process groups; one Ctrl-C or SIGTERM stops them all (TERM, then KILL)."""

    def __init__(self, env: dict[str, str], log_dir: Path) -> None:
        self.env = env
        self.log_dir = log_dir
        self.children: dict[str, tuple[list[str], dict[str, str], subprocess.Popen[bytes]]] = {}
        self.stopping = False

    def start(self, name: str, argv: list[str], extra: dict[str, str]) -> None:
        # 0600: a service's log names its credential's path, runs, tenants and errors; jobs run as other users
        log = os.fdopen(os.open(self.log_dir / f"{name}.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600), "ab")
        # Each child ends when `up` does, however it ends (a kill -9 included): none is left holding the ports,
        # the data dir or running jobs.
        proc = subprocess.Popen(
            argv, env={**self.env, **extra}, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            preexec_fn=ends_with(os.getpid()),
        )
        log.close()
        self.children[name] = (argv, extra, proc)

    def restart_dead(self) -> None:
        for name, (argv, extra, proc) in list(self.children.items()):
            if proc.poll() is not None and not self.stopping:
                typer.echo(f"jetcron up: {name} exited with {proc.returncode}; restarting", err=True)
                self.start(name, argv, extra)

    def stop(self, grace: float = 25.0) -> None:
        self.stopping = True
        for _, _, proc in self.children.values():
            if proc.poll() is None:
                with _quiet():
                    os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        for _, _, proc in self.children.values():
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                with _quiet():
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


class _quiet:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> bool:
        return exc[0] is not None and issubclass(exc[0], (ProcessLookupError, PermissionError))  # type: ignore[arg-type]


def up(
    port: int = typer.Option(4222, "--port", help="NATS client port (on --listen)"),
    listen: str = typer.Option(
        "127.0.0.1", "--listen", help="the IPv4 address NATS takes clients on: 0.0.0.0 lets agents on other hosts "
        "join (`jetcron agents add`); every connection still needs a credential"
    ),
    agents: int = typer.Option(2, "--agents", help="local agents to start"),
    data_dir: Path = typer.Option(Path(".jetcron"), "--data-dir", help="NATS store, logs and agent state"),
    allow_unsafe_storage: bool = typer.Option(
        False, "--allow-unsafe-storage", help="run NATS without fsync before ack (throwaway dev setups only)"
    ),
    sim: bool = typer.Option(False, "--sim", help="agents execute nothing and report success (scale tests)"),
    no_auth: bool = typer.Option(
        False, "--no-auth", help="accept any connection with every permission (throwaway dev setups only)"
    ),
    http_port: int = typer.Option(8080, "--http-port", help="the REST API (the gateway) on 127.0.0.1"),
    tls: bool = typer.Option(
        False, "--tls", help="encrypt every connection (a CA and a server certificate are made under DATA_DIR/tls)"
    ),
) -> None:
    """Run everything on this machine until Ctrl-C; restarting on the same --data-dir keeps every job and run.

    Authentication is on: the first start makes an operator, the JETCRON account and one credential per
    service and agent under DATA_DIR/auth (mode 0700), and an admin credential the CLI finds by itself."""
    shared = _shared(listen, no_auth)
    data_dir = data_dir.resolve()
    close_data_dir(data_dir)
    held = hold_data_dir(data_dir)
    creds = None if no_auth else LocalCreds.ensure(data_dir / "auth", agents)
    certs = ensure_local_tls(data_dir / "tls", _tls_names(listen) if shared else DEFAULT_HOSTS) if tls else None
    server = EmbeddedNats(data_dir / "nats", port=port, sync_always=not allow_unsafe_storage,
                          extra_config=creds.authority.server_config() if creds else "", tls=certs, listen=listen)
    try:
        server.start(with_parent=True)
    except (RuntimeError, TimeoutError) as exc:
        typer.echo(f"jetcron up: nats-server did not start ({exc}); is port {port} in use?", err=True)
        raise typer.Exit(1) from None
    env = {
        **os.environ,
        "JETCRON_NATS_URL": server.url,
        "JETCRON_NATS_MONITOR_URL": server.monitor_url,
        "JETCRON_DATA_DIR": str(data_dir),
        "JETCRON_HTTP_PORT": str(http_port),
    }
    if allow_unsafe_storage:
        env["JETCRON_ALLOW_UNSAFE_STORAGE"] = "true"
    if certs is not None:
        env["JETCRON_NATS_TLS_CA"] = str(certs.ca)
    if sim:
        env["JETCRON_AGENT_SIM"] = "true"
    job_uids, job_uids_said = local_job_uids(os.geteuid(), os.environ, agents, {p.pw_uid for p in pwd.getpwall()},
                                             {g.gr_gid for g in grp.getgrall()})
    sup = Supervisor(env, data_dir / "logs")
    context = write_context(server.url, creds.admin if creds else None, certs.ca if certs else None,
                            creds.root if creds else None)
    stop = {"flag": False}

    def on_signal(_sig: int, _frame: object) -> None:
        stop["flag"] = True

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    try:
        for name in SERVICES:
            sup.start(name, [sys.executable, "-m", f"jetcron_services.{name}"], creds.env(name) if creds else {})
        for i in range(1, agents + 1):
            agent_id = f"agent-{i}"
            sup.start(agent_id, [sys.executable, "-m", "jetcron_services.agent"],
                      {"JETCRON_AGENT_ID": agent_id, **job_uids, **(creds.env(agent_id) if creds else {})})
        typer.echo(
            f"jetcron up: NATS at {server.url} (monitor {server.monitor_url}), "
            f"{len(SERVICES)} services and {agents} agents; logs in {data_dir / 'logs'}; Ctrl-C stops all"
        )
        if job_uids_said:
            typer.echo(f"jetcron up: {job_uids_said}")
        if shared:
            typer.echo(f"jetcron up: NATS takes clients from other hosts on {listen}:{port}, each with a credential "
                       f"of this system: `jetcron agents add ID --creds-out FILE` makes one for an agent"
                       + ("" if certs else "; traffic is not encrypted (--tls)"))
        typer.echo(f"jetcron up: authentication {'OFF (--no-auth)' if creds is None else 'on'}, "
                   f"TLS {'on' if certs else 'off'}; "
                   f"the CLI finds this system through {context}"
                   + (f" (admin credential {creds.admin})" if creds else ""))
        typer.echo(f"jetcron up: REST API at http://127.0.0.1:{http_port}/api/v1 (docs: /api/v1/docs), dashboard "
                   f"at http://127.0.0.1:{http_port}/ui; a token for either: `jetcron tokens create --tenant NAME` "
                   "(or --admin)")
        typer.echo(f"jetcron up: waiting for {len(SERVICES)} services and {agents} agents to answer")
        began = time.monotonic()
        missing = wait_ready(server.url, Identity(creds=str(creds.admin) if creds else None,
                                                  tls_ca=str(certs.ca) if certs else None),
                             {**dict.fromkeys(SERVICES, 1), **({"agent": agents} if agents else {})}, sup,
                             lambda: stop["flag"])
        if missing == []:
            typer.echo(f"jetcron up: ready ({time.monotonic() - began:.1f} s): every service and agent answers")
        elif missing is not None:
            typer.echo(f"jetcron up: not ready after {READY_WITHIN:g} s: {', '.join(missing)} do not answer yet; "
                       f"see their logs in {data_dir / 'logs'} (`jetcron status` shows each instance)", err=True)
        while not stop["flag"]:
            time.sleep(0.5)
            sup.restart_dead()
    finally:
        typer.echo("jetcron up: stopping", err=True)
        sup.stop()
        server.stop()
        held.close()


def wait_ready(url: str, identity: Identity, expected: Mapping[str, int], sup: Supervisor,
               stopped: Callable[[], bool]) -> list[str] | None:
    """Until every expected service and agent (name -> instances) is ready and answers `$SRV.PING`, as `jetcron
    status` sees them, restarting a child that exits meanwhile: [] then; those that do not yet once READY_WITHIN
    passes; None when `up` is told to stop first."""

    async def poll() -> list[str] | None:
        deadline = time.monotonic() + READY_WITHIN
        missing = list(expected)
        client: Client | None = None
        try:
            while not stopped():
                try:
                    if client is None:
                        client = await Client.connect(url, timeout=5, identity=identity)
                    assert client.nc is not None  # Client.connect makes a connection of its own
                    missing = await not_ready(client.nc, expected)
                except Exception:  # the server or its buckets not there yet: asked again next round
                    pass
                if not missing or time.monotonic() > deadline:
                    return missing
                sup.restart_dead()
                await asyncio.sleep(READY_POLL)
            return None
        finally:
            if client is not None:
                await client.close()

    return asyncio.run(poll())


def hold_data_dir(data_dir: Path) -> IO[str]:
    """Hold DATA_DIR for this `up` (an exclusive lock on DATA_DIR/up.lock, with the holder's pid in it): a second
    `up` on it stops here rather than start a second server and second agents on the same store. The lock goes
    with the process, however it ends."""
    lock = open(data_dir / "up.lock", "a+")  # noqa: SIM115 - held until `up` ends
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        lock.seek(0)
        holder = lock.read().strip() or "unknown"
        lock.close()
        typer.echo(f"jetcron up: already running on {data_dir} (pid {holder}); stop that one first (Ctrl-C or "
                   "kill PID), or give this one another --data-dir", err=True)
        raise typer.Exit(1) from None
    lock.seek(0)
    lock.truncate()
    lock.write(f"{os.getpid()}\n")
    lock.flush()
    return lock


def local_job_uids(euid: int, environ: Mapping[str, str], agents: int, named_users: Collection[int],
                   named_groups: Collection[int]) -> tuple[dict[str, str], str | None]:
    """The uid range `up` gives its local agents (as JETCRON_AGENT_JOB_UIDS), and what to say of it.

    On one machine every tenant's jobs run on the same agents; as one user (`nobody`) any of them could read another's
    running job's scratch and environment through /proc/PID/cwd and /proc/PID/environ. So, run as root and with no
    range set, `up` gives each attempt a uid of its own from a range no user or group of this host reaches into
    (jetcron.core.host.uid_pool.local_range), room for every slot of every agent at once. A set JETCRON_AGENT_JOB_UIDS,
    even empty (off), is the agents' own to read; a non-root `up` switches no user, nor does
    JETCRON_AGENT_JOB_USER=@agent. An agent started with no range takes one the same way for its own slots
    (services/jetcron_services/agent/host/scratch.py, job_uid_range); `up` takes one that holds all its agents' at once,
    which they share through the uid locks."""
    if euid != 0 or agents < 1 or "JETCRON_AGENT_JOB_UIDS" in environ \
            or environ.get("JETCRON_AGENT_JOB_USER") == "@agent":
        return {}, None
    try:
        slots = max(1, int(environ.get("JETCRON_AGENT_SLOTS", "")))
    except ValueError:  # unset (or malformed: the agent refuses that itself, naming it)
        slots = int(Settings.model_fields["agent_slots"].default)
    uids = local_range(agents * slots, named_users, named_groups)
    if uids is None:
        tried = ", ".join(format_uid_range(r) for r in LOCAL_RANGES)
        return {}, (f"every job runs as {environ.get('JETCRON_AGENT_JOB_USER', 'nobody')}, so a running job can read "
                    f"another's scratch and environment: no uid range free of this host's users and groups ({tried}) "
                    f"holds {agents} agents x {slots} slots; JETCRON_AGENT_JOB_UIDS=FIRST-LAST gives each attempt a "
                    "uid of its own")
    text = format_uid_range(uids)
    return {"JETCRON_AGENT_JOB_UIDS": text}, (
        f"each job runs as a uid of its own from {text} (no user or group of this host has one), so no running job "
        "reads another's scratch or environment; JETCRON_AGENT_JOB_UIDS=FIRST-LAST picks another range, "
        "JETCRON_AGENT_JOB_UIDS= (empty) runs every job as one user")


def close_data_dir(data_dir: Path) -> None:
    """Everything `up` keeps under DATA_DIR is its user's alone, so that a job running as another user opens none
    of it (docs/security.md, "A job's view of the host"): the folder itself 0700 (an agent whose jobs must pass
    through it to their scratch makes it 0711, searchable but not listable:
    services/jetcron_services/agent/host/scratch.py), the logs and the NATS store (with the server's config and log)
    0700, each log 0600 (those an earlier version made 0644 too). auth/ is 0700 and every key and credential 0600
    already (jetcron.auth.authority)."""
    data_dir.mkdir(parents=True, exist_ok=True)
    os.chmod(data_dir, 0o700)
    for sub in ("logs", "nats"):
        (data_dir / sub).mkdir(exist_ok=True)
        os.chmod(data_dir / sub, 0o700)
    for log in (data_dir / "logs").glob("*.log"):
        os.chmod(log, 0o600)


def _shared(listen: str, no_auth: bool) -> bool:
    """Whether NATS takes clients beyond loopback; refuses an address that is not one, and --no-auth with it."""
    try:
        address = ipaddress.IPv4Address(listen)
    except ValueError:
        typer.echo(f"usage error: --listen {listen!r}: an IPv4 address of this host, or 0.0.0.0 for all", err=True)
        raise typer.Exit(2) from None
    if not address.is_loopback and no_auth:
        typer.echo(f"usage error: --listen {listen} with --no-auth would give every host that reaches the port every "
                   "permission: drop one of them", err=True)
        raise typer.Exit(2)
    return not address.is_loopback


def _tls_names(listen: str) -> tuple[str, ...]:
    """The names a new server certificate carries when other hosts connect: this host's, and the address."""
    names = [*DEFAULT_HOSTS, socket.gethostname(), socket.getfqdn()]
    if listen != "0.0.0.0":
        names.append(listen)
    return tuple(dict.fromkeys(names))

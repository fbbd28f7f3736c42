"""An agent joins a running system in one command (`jetcron agents add`) and is cut off in one
(`jetcron agents revoke`), on a server in operator mode: the system of `jetcron up`, and a node of
`jetcron deploy init`."""

from __future__ import annotations

import asyncio
import json
import shlex
import subprocess
import urllib.request
from pathlib import Path
from typing import Any

import nats
import nats.errors
import pytest
from harness import FAST_SETTINGS, JETCRON, ServiceProcess, Services, clean_env, mint, run_cli, wait_for

from jetcron.auth.authority import Authority, identity_of
from jetcron.auth.roles import Role
from jetcron.bus.connect import Identity
from jetcron.bus.server import free_ports, nats_server_binary
from jetcron.sdk.client import Client

FILES = ("JETCRON_NATS_CREDS", "JETCRON_SECRETS_KEY_FILE", "JETCRON_NATS_TLS_CA")


def printed_command(stdout: str, folder: Path) -> dict[str, str]:
    """The `VAR=value ... jetcron agent` line `agents add` prints, as an environment: its files are named as they
    are in the folder that holds them, so they are looked up there."""
    lines = [line for line in stdout.splitlines() if line.rstrip().endswith(" jetcron agent")]
    assert len(lines) == 1, stdout
    words = shlex.split(lines[0])
    assert words[-2:] == ["jetcron", "agent"], lines[0]
    env = dict(word.split("=", 1) for word in words[:-2])
    return {k: str(folder / v) if k in FILES else v for k, v in env.items()}


async def connection(url: str, identity: Identity, errors: list[str]) -> Any:
    async def on_error(exc: Exception) -> None:
        errors.append(str(exc))

    return await nats.connect(url, error_cb=on_error, allow_reconnect=False, max_reconnect_attempts=0,
                              connect_timeout=5, **identity.options())


async def refused(url: str, identity: Identity) -> str:
    with pytest.raises(nats.errors.Error) as caught:
        await connection(url, identity, [])
    return str(caught.value)


def users_connected(monitor_url: str) -> list[str]:
    with urllib.request.urlopen(f"{monitor_url}/connz?auth=true&limit=1024", timeout=5) as reply:
        found = json.loads(reply.read())
    return [c.get("authorized_user", "") for c in found.get("connections") or []]


async def test_an_added_agent_joins_with_its_file_alone_runs_a_job_and_is_cut_off_when_revoked(
        secure_services: Services, authority: Authority, tmp_path: Path) -> None:
    # Given a running system with no agent of its own (the core services record the server's fsync check)
    await secure_services.start_system(agents=0)
    server = secure_services.server

    # When the admin adds agent host-b, and host-b runs exactly the printed command, with the files beside it
    host_b = tmp_path / "host-b"
    added = run_cli(server.url, "agents", "add", "host-b", "--creds-out", str(host_b / "host-b.creds"),
                    "--url", server.url, "--auth-dir", str(authority.root))
    assert added.returncode == 0, added.stderr
    env = printed_command(added.stdout, host_b)
    assert set(env) == {"JETCRON_NATS_URL", "JETCRON_NATS_CREDS", "JETCRON_SECRETS_KEY_FILE", "JETCRON_AGENT_ID"}
    public = identity_of((host_b / "host-b.creds").read_text())
    assert public["agent"] == "host-b"
    # No monitor URL: a host elsewhere reaches none, and trusts the check a core service recorded
    agent = ServiceProcess("host-b", [JETCRON, "agent"], clean_env(
        **env, **FAST_SETTINGS, JETCRON_DATA_DIR=str(host_b / "data")),
        secure_services.log_dir / "host-b.log").start()
    secure_services.procs["host-b"] = agent
    await agent.wait_logged("agent ready", 30)

    # Then it is registered and runs a job
    admin = await Client.connect(server.url, timeout=10, identity=Identity(
        creds=mint(authority, tmp_path / "admin.creds", Role.ADMIN)))
    try:
        await wait_for(lambda: _registered(admin, "host-b"), 15, what="host-b registered")
        await admin.call("jobs.create", {"spec": {"name": "joined", "schedule": {"kind": "now"},
                                                  "command": ["sh", "-c", "echo ran on $JETCRON_AGENT_ID"]}})
        run = await wait_for(lambda: _ended(admin, "joined"), 30, what="the job's run to end")
        assert (run["state"], run["agent"]) == ("succeeded", "host-b"), run
        assert (await admin.call("runs.logs", {"run_id": run["run_id"]}))["output"] == "ran on host-b\n"
    finally:
        await admin.close()

    # And with the same credential, it cannot publish under another agent's id (its grant names its own)
    creds = Identity(creds=str(host_b / "host-b.creds"))
    errors: list[str] = []
    live = await connection(server.url, creds, errors)
    try:
        await live.publish("$KV.jc_agents.agent-1", b"{}")
        await live.flush(timeout=5)
        await wait_for(lambda: any("permissions violation" in e.lower() and "jc_agents.agent-1" in e for e in errors),
                       5, what="the server to refuse host-b's publish under agent-1")
        users = users_connected(server.monitor_url)
        issued = [i.public for i in authority.issued() if i.subject == "host-b"]
        assert users.count(issued[0]) >= 2, users  # the agent's connection and this one

        # When the admin revokes host-b
        revoked = run_cli(server.url, "agents", "revoke", "host-b", "--auth-dir", str(authority.root))
        assert revoked.returncode == 0, revoked.stderr
        assert "agent host-b: revoked 1 credential(s)" in revoked.stdout

        # Then a new connection with its file is refused, and the open ones, the agent's too, are closed
        assert "Authorization Violation" in await refused(server.url, creds)
        await wait_for(lambda: not live.is_connected, 10, what="the revoked connection to be dropped")
        await wait_for(lambda: issued[0] not in users_connected(server.monitor_url), 10,
                       what="the agent's connection to be dropped")
        await asyncio.sleep(1.5)  # the agent keeps trying to reconnect: it stays out
        assert issued[0] not in users_connected(server.monitor_url)
    finally:
        await live.close()
        agent.kill9()


async def _registered(admin: Client, agent_id: str) -> bool:
    return any(a["agent_id"] == agent_id for a in (await admin.call("agents.list"))["items"])


async def _ended(admin: Client, job: str) -> dict[str, Any] | None:
    runs = (await admin.call("runs.list", {"job": job}))["items"]
    return runs[0] if runs and runs[0]["state"] in ("succeeded", "failed", "dead") else None


async def test_a_bad_agent_id_is_refused_naming_the_field(secure_server: Any, authority: Authority,
                                                          tmp_path: Path) -> None:
    for command in (["add", "--creds-out", str(tmp_path / "x.creds")], ["revoke"]):
        bad = run_cli(secure_server.url, "agents", *command, "--auth-dir", str(authority.root), "--", "host b")
        assert bad.returncode == 2, bad
        assert "agent id 'host b': must be 1-63 letters" in bad.stderr
    assert not (tmp_path / "x.creds").exists()


async def test_an_agent_added_to_a_deployed_cluster_connects_over_tls_and_is_revoked(tmp_path: Path) -> None:
    # Given a node of `jetcron deploy init` (TLS on), moved to loopback ports and this test's files
    gen = tmp_path / "gen"
    made = subprocess.run([JETCRON, "deploy", "init", "--dir", str(gen), "--nodes", "1", "--host", "localhost"],
                          capture_output=True, text=True, timeout=60, env=clean_env(), check=False)
    assert made.returncode == 0, made.stderr
    client, monitor = free_ports(2)
    config = (gen / "nats" / "localhost.conf").read_text()
    config = (config.replace("0.0.0.0:4222", f"127.0.0.1:{client}").replace("0.0.0.0:8222", f"127.0.0.1:{monitor}")
              .replace("/etc/jetcron/tls", str(gen / "tls")).replace("/data", str(tmp_path / "data")))
    (tmp_path / "node.conf").write_text(config)
    node = subprocess.Popen([nats_server_binary(), "-c", str(tmp_path / "node.conf")], stdout=subprocess.DEVNULL,
                            stderr=subprocess.STDOUT)
    url, ca = f"tls://localhost:{client}", str(gen / "tls" / "ca.pem")
    admin = ["--nats", url, "--tls-ca", ca, "--creds", str(gen / "auth" / "admin.creds")]
    try:
        # When the admin adds host-c with the deploy's keys
        added = run_cli(None, *admin, "agents", "add", "host-c", "--creds-out", str(tmp_path / "host-c.creds"),
                        "--url", url, "--auth-dir", str(gen / "auth"))
        assert added.returncode == 0, added.stderr
        env = printed_command(added.stdout, gen / "tls")
        assert env["JETCRON_NATS_TLS_CA"] == ca and env["JETCRON_NATS_URL"] == url

        # Then its file connects, over TLS
        creds = Identity(creds=str(tmp_path / "host-c.creds"), tls_ca=ca)
        live = await wait_for(lambda: _connected(url, creds), 15, what="the node to take host-c's connection")
        try:
            # and once revoked, it is refused and dropped
            revoked = run_cli(None, *admin, "agents", "revoke", "host-c", "--auth-dir", str(gen / "auth"))
            assert revoked.returncode == 0, revoked.stderr
            assert "Authorization Violation" in await refused(url, creds)
            await wait_for(lambda: not live.is_connected, 10, what="the revoked connection to be dropped")
        finally:
            await live.close()
    finally:
        node.terminate()
        node.wait(timeout=10)


async def _connected(url: str, identity: Identity) -> Any:
    try:
        return await connection(url, identity, [])
    except (OSError, nats.errors.Error):
        return None

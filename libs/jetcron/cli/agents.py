"""`jetcron agents ...`: the registered agents (an API verb), and agents' credentials (minted and revoked with the
local keys, like tenants'), so a host joins a running system in one command."""

from __future__ import annotations

import os
import shlex
import socket
import urllib.parse
from pathlib import Path

import typer

from jetcron.auth import jwt
from jetcron.auth.authority import Authority
from jetcron.auth.keyfile import ensure_key_file
from jetcron.auth.roles import Role
from jetcron.cli.connection import target
from jetcron.cli.keys import AuthDir, local_authority, push_revocations
from jetcron.cli.output import usage
from jetcron.cli.runs import agents_app
from jetcron.core.ids import AGENT_ID_RE

app = agents_app
"""The one `agents` group: `list` (runs.py) beside `add` and `revoke`."""

LOOPBACK = ("127.0.0.1", "localhost", "::1")


def check_agent_id(agent_id: str) -> str:
    if not AGENT_ID_RE.fullmatch(agent_id):
        usage(f"agent id {agent_id!r}: must be 1-63 letters, digits, '-' or '_', starting with a letter or digit")
    return agent_id


def credentials_of(authority: Authority, agent_id: str) -> list[str]:
    """The public keys of every credential the ledger issued to this agent id."""
    return [i.public for i in authority.issued() if i.role == Role.AGENT.value and i.subject == agent_id]


def remote_url(url: str, host: str) -> str:
    """`url` (comma-separated for a cluster) with each loopback host replaced by `host`: what another host dials."""
    parts = []
    for part in url.split(","):
        split = urllib.parse.urlsplit(part.strip())
        if split.hostname in LOOPBACK:
            split = split._replace(netloc=f"{host}:{split.port}" if split.port else host)
        parts.append(urllib.parse.urlunsplit(split))
    return ",".join(parts)


def this_host() -> str:
    name = socket.getfqdn()
    return name if name not in LOOPBACK and not name.startswith("localhost") else socket.gethostname()


def agent_command(env: dict[str, str]) -> str:
    return " ".join(f"{name}={shlex.quote(value)}" for name, value in env.items()) + " jetcron agent"


def _write_private(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.chmod(path, 0o600)


@app.command("add")
def add(
    ctx: typer.Context,
    agent_id: str = typer.Argument(..., metavar="ID", help="the agent's id (its host's name, say)"),
    creds_out: Path = typer.Option(..., "--creds-out", help="where to write the agent's credential (mode 0600)"),
    secrets_key: bool = typer.Option(
        True, "--secrets-key/--no-secrets-key", help="also write the key tenants' stored secrets are encrypted "
        "under, beside the credential as <name>.secrets.key (mode 0600): without it the agent runs only jobs whose "
        "secrets are files on its host"),
    rotate: bool = typer.Option(False, "--rotate", help="issue another credential to an agent that has one (to "
                                "rotate it: then `jetcron agents revoke ID --key OLD`)"),
    url: str | None = typer.Option(None, "--url", help="the NATS URL the agent's host reaches this system at, for "
                                   "the printed command (default: this system's, with this host's name for "
                                   "127.0.0.1)"),
    auth: Path | None = AuthDir,
) -> None:
    """Issue a credential for agent ID (admin): it may act as that agent only. Prints what to run on its host."""
    check_agent_id(agent_id)
    authority = local_authority(auth)
    revoked = authority.revocations()
    live = [public for public in credentials_of(authority, agent_id) if public not in revoked]
    if live and not rotate:
        usage(f"agent id {agent_id!r} already has a credential ({', '.join(live)}): two agents with one id would "
              f"take each other's work; `jetcron agents revoke {agent_id}` first, or --rotate to issue another")
    issued = authority.write_creds(creds_out, Role.AGENT, agent_id=agent_id)
    typer.echo(f"agent {agent_id}: credential {issued.public} written to {creds_out}")
    where = target(ctx)
    env = {"JETCRON_NATS_URL": url or remote_url(where.url, this_host()), "JETCRON_NATS_CREDS": creds_out.name}
    files = [str(creds_out)]
    if secrets_key:
        key_out = creds_out.with_suffix(".secrets.key")
        _write_private(key_out, ensure_key_file(authority.root / "secrets.key").read_bytes())
        typer.echo(f"agent {agent_id}: the secrets key written to {key_out}: with it the agent decrypts every "
                   "tenant's stored secrets (docs/security.md, Secrets)")
        env["JETCRON_SECRETS_KEY_FILE"] = key_out.name
        files.append(str(key_out))
    if where.identity.tls_ca:
        env["JETCRON_NATS_TLS_CA"] = Path(where.identity.tls_ca).name
        files.append(where.identity.tls_ca)
    env["JETCRON_AGENT_ID"] = agent_id
    typer.echo(f"Copy {', '.join(files)} to {agent_id}; there, with jetcron installed, in the folder that holds them:")
    typer.echo(f"  {agent_command(env)}")
    if url is None and env["JETCRON_NATS_URL"] != where.url:
        typer.echo(f"(this system is at {where.url} here; another host reaches a `jetcron up` only when it listens "
                   "beyond loopback: `jetcron up --listen 0.0.0.0`; --url prints another address)")
    if live:
        typer.echo(f"agent {agent_id}: once it runs on the new credential, `jetcron agents revoke {agent_id} "
                   + " ".join(f"--key {public}" for public in live) + "`")


@app.command("revoke")
def revoke(
    ctx: typer.Context,
    agent_id: str = typer.Argument(..., metavar="ID"),
    key: list[str] = typer.Option([], "--key", help="revoke only this credential (its public key, U...)"),
    auth: Path | None = AuthDir,
) -> None:
    """Revoke every credential of agent ID, or those --key names (admin): refused and disconnected at once."""
    check_agent_id(agent_id)
    authority = local_authority(auth)
    mine = credentials_of(authority, agent_id)
    chosen = key or mine
    unknown = sorted(set(chosen) - set(mine))
    if not chosen or unknown:
        usage(f"agent id {agent_id!r} has no credential {', '.join(unknown) or 'issued'}")
    message = push_revocations(ctx, authority, chosen)
    typer.echo(f"agent {agent_id}: revoked {len(chosen)} credential(s); {message}; it leaves `jetcron agents list` "
               "when its last heartbeat expires")
    local = authority.root / "creds" / f"{agent_id}.creds"
    if local.exists() and jwt.decode(jwt.creds_jwt(local.read_text())).get("sub") in chosen:
        typer.echo(f"{local} is revoked: delete it, and `jetcron up` or `jetcron deploy init --agent {agent_id}` "
                   "mints a new one")

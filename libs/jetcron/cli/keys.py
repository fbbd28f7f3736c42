"""The local keys behind the CLI's credential commands (agents, tenants): found, and revocations pushed."""

from __future__ import annotations

import asyncio
from pathlib import Path

import typer

from jetcron.auth.authority import Authority
from jetcron.bus.accounts import push_account
from jetcron.bus.connect import Identity
from jetcron.cli.connection import target
from jetcron.cli.identity import auth_dir
from jetcron.cli.output import fail, usage
from jetcron.core.errors import JetcronError

AuthDir = typer.Option(None, "--auth-dir", envvar="JETCRON_AUTH_DIR",
                       help="the keys of this system (default: the one `jetcron up` wrote; for a cluster, the auth/ "
                       "folder of `jetcron deploy init --dir`)")


def local_authority(path: Path | None) -> Authority:
    root = path or auth_dir()
    if root is None or not Authority.exists(root):
        usage(f"--auth-dir: no keys found at {root or 'the default places'}: give the auth/ folder of `jetcron up`'s "
              "data dir, or of `jetcron deploy init --dir`")
    return Authority(root)


def push_revocations(ctx: typer.Context, authority: Authority, publics: list[str]) -> str:
    """Revoke `publics` in the account JWT and push it to the running servers, which refuse those credentials
    from then on and drop their open connections; the server's answer."""
    token = authority.revoke(publics)
    where = target(ctx)
    sys_identity = Identity(creds=str(authority.sys_creds()), tls_ca=where.identity.tls_ca)
    try:
        return asyncio.run(push_account(where.url, token, sys_identity))
    except JetcronError as exc:
        fail(exc)

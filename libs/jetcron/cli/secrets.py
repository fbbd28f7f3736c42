"""`jetcron secrets set|list|delete`: a tenant's secrets. A value is read from stdin or a file, never argv."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from jetcron.cli.connection import client
from jetcron.cli.output import emit, output_option, usage

app = typer.Typer(no_args_is_help=True)
Output = output_option()
Tenant = typer.Option(None, "--tenant", help="admin only: whose secret (a tenant credential names its own)")


@app.command("set")
def set_secret(ctx: typer.Context, name: str, tenant: str | None = Tenant,
               from_file: Path | None = typer.Option(None, "--from-file", help="read the value from this file"),
               output: str = Output) -> None:
    """Store NAME's value (from stdin, or --from-file), encrypted; jobs get it with --secret NAME."""
    if from_file is not None:
        try:
            value = from_file.read_text().rstrip("\n")
        except OSError as exc:
            usage(f"--from-file {from_file}: {exc.strerror or exc}")
    elif sys.stdin.isatty():
        usage("give the value on stdin (e.g. `printf %s \"$VALUE\" | jetcron secrets set NAME`) or --from-file")
    else:
        value = sys.stdin.read().rstrip("\n")
    with client(ctx) as c:
        result = c.secrets.set(name, value, tenant=tenant)
    emit(result, output, ("tenant", "name", "updated_at"))


@app.command("list")
def list_secrets(ctx: typer.Context, tenant: str | None = Tenant, output: str = Output) -> None:
    """The names of a tenant's secrets (never their values)."""
    with client(ctx) as c:
        result = c.secrets.list(tenant=tenant)
    emit([{"tenant": result.tenant, "name": n} for n in result.items], output, ("tenant", "name"))


@app.command("delete")
def delete_secret(ctx: typer.Context, name: str, tenant: str | None = Tenant, output: str = Output) -> None:
    with client(ctx) as c:
        result = c.secrets.delete(name, tenant=tenant)
    emit(result, output, ("tenant", "name", "deleted"))

"""`jetcron tokens create|list|revoke`: the REST API's bearer tokens (admin only)."""

from __future__ import annotations

import typer

from jetcron.cli.connection import client
from jetcron.cli.output import emit, output_option, usage

app = typer.Typer(no_args_is_help=True)
Output = output_option()


@app.command("create")
def create(ctx: typer.Context,
           tenant: str | None = typer.Option(None, "--tenant", help="the tenant the token acts for"),
           admin: bool = typer.Option(False, "--admin", help="a token for the admin (every tenant, admin routes)"),
           name: str = typer.Option("", "--name", help="a label: who or what holds it"),
           output: str = output_option("token", "token", "table", "json",
                                       help="token (the token alone), table or json"),
           ) -> None:
    """Issue a token and print it: it is shown this once (only its digest is stored)."""
    if admin == (tenant is not None):
        usage("give exactly one of --tenant NAME or --admin")
    with client(ctx) as c:
        result = c.tokens.create(tenant=tenant, admin=admin or None, name=name or None)
    if output == "token":
        typer.echo(result.token)
        return
    emit(result, output, ("token_id", "tenant", "admin", "name", "token"))


@app.command("list")
def list_tokens(ctx: typer.Context, tenant: str | None = typer.Option(None, "--tenant", help="only this tenant's"),
                output: str = Output) -> None:
    """Issued tokens: id, tenant and label (never the token)."""
    with client(ctx) as c:
        result = c.tokens.list(tenant=tenant)
    emit(result.items, output, ("token_id", "tenant", "admin", "name", "created_at"))


@app.command("revoke")
def revoke(ctx: typer.Context, token_id: str, output: str = Output) -> None:
    """Refuse TOKEN_ID from now on, at every gateway replica, without restarting anything."""
    with client(ctx) as c:
        result = c.tokens.revoke(token_id)
    emit(result, output, ("token_id", "revoked"))

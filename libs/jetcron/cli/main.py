"""The `jetcron` command: run the system (up, one service each) and talk to it (jobs, runs, agents, ...)."""

from __future__ import annotations

from importlib.metadata import version as installed_version

import typer

from jetcron.cli import (
    agents,
    calendars,
    certs,
    deploy,
    identity,
    jobs,
    notifications,
    runs,
    secrets,
    services,
    status,
    tenants,
    tokens,
    up,
)

app = typer.Typer(
    no_args_is_help=True, add_completion=False, help="jetcron: a distributed job scheduler on NATS JetStream."
)


def _print_version(wanted: bool) -> None:
    if wanted:
        typer.echo(f"jetcron {installed_version('jetcron')}")
        raise typer.Exit()


@app.callback()
def root(
    ctx: typer.Context,
    nats: str = typer.Option(
        None, "--nats", envvar="JETCRON_NATS_URL", help="NATS URL (default: the context `jetcron up` wrote, "
        "else nats://127.0.0.1:4222)"
    ),
    creds: str = typer.Option(
        None, "--creds", envvar="JETCRON_NATS_CREDS", help="NATS credentials file (default: the admin "
        "credential of the local `jetcron up`)"
    ),
    tls_ca: str = typer.Option(
        None, "--tls-ca", envvar="JETCRON_NATS_TLS_CA", help="CA certificate that signed the server's (TLS)"
    ),
    version: bool = typer.Option(
        False, "--version", is_eager=True, callback=_print_version, help="Print jetcron's version and exit."
    ),
) -> None:
    ctx.obj = {"nats": nats, "target": identity.resolve(nats, creds, tls_ca)}


app.command("up")(up.up)
app.command("status")(status.status)
for name, fn in services.COMMANDS.items():
    app.command(name, context_settings={"allow_extra_args": False})(fn)
app.add_typer(jobs.app, name="jobs", help="Create and manage jobs.")
app.add_typer(runs.app, name="runs", help="Inspect, cancel and read runs.")
app.add_typer(agents.app, name="agents", help="Registered agents, and agents' credentials (add, revoke).")
app.add_typer(runs.dlq_app, name="dlq", help="The dead-letter queue.")
app.add_typer(tenants.app, name="tenants", help="Tenant quotas, weights and credentials.")
app.add_typer(jobs.schedule_app, name="schedule", help="Schedule tools that need no server.")
app.add_typer(secrets.app, name="secrets", help="A tenant's secrets (values go in, never come out).")
app.add_typer(notifications.app, name="notifications", help="Who was told what about a job's runs; redeliver.")
app.add_typer(calendars.app, name="calendars", help="Named calendars jobs skip (--exclude) or keep to (--only).")
app.add_typer(tokens.app, name="tokens", help="Bearer tokens for the REST API (admin only).")
app.add_typer(deploy.app, name="deploy", help="Keys, credentials, certificates and NATS configs for a cluster.")
app.add_typer(certs.app, name="certs", help="A CA and certificates for NATS TLS (no server needed).")


def main() -> None:
    app()

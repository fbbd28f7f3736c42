"""The `jetcron` command: run the system (up, one service each) and talk to it (jobs, runs, agents, ...).

Each command's module is imported only when that command runs: `jetcron --help` lists them from the table below,
and `jetcron jobs list` imports the jobs commands and what they use, not the dashboard's or the services'.
Most of a CLI call's time is imports (bench/cli_start.py)."""

from __future__ import annotations

import importlib
from typing import Any

import typer
from typer.core import TyperCommand, TyperGroup
from typer.main import get_command

GROUPS: dict[str, tuple[str, str, str]] = {
    "jobs": ("jetcron.cli.jobs", "app", "Create and manage jobs."),
    "runs": ("jetcron.cli.runs", "app", "Inspect, cancel and read runs."),
    "agents": ("jetcron.cli.agents", "app", "Registered agents, and agents' credentials (add, revoke)."),
    "dlq": ("jetcron.cli.runs", "dlq_app", "The dead-letter queue."),
    "tenants": ("jetcron.cli.tenants", "app", "Tenant quotas, weights and credentials."),
    "schedule": ("jetcron.cli.jobs", "schedule_app", "Schedule tools that need no server."),
    "secrets": ("jetcron.cli.secrets", "app", "A tenant's secrets (values go in, never come out)."),
    "notifications": ("jetcron.cli.notifications", "app", "Who was told what about a job's runs; redeliver."),
    "calendars": ("jetcron.cli.calendars", "app", "Named calendars jobs skip (--exclude) or keep to (--only)."),
    "tokens": ("jetcron.cli.tokens", "app", "Bearer tokens for the REST API (admin only)."),
    "deploy": ("jetcron.cli.deploy", "app", "Keys, credentials, certificates and NATS configs for a cluster."),
    "certs": ("jetcron.cli.certs", "app", "A CA and certificates for NATS TLS (no server needed)."),
}
"""Command groups: name -> (module, its typer app, the help line)."""
COMMANDS: dict[str, tuple[str, str, str]] = {
    "up": ("jetcron.cli.up", "up", "Run everything on this machine until Ctrl-C; restarting on the same --data-dir "
                                   "keeps every job and run."),
    "status": ("jetcron.cli.status", "status", "Services alive, leaders and shard holders, agents and free "
                                               "capacity, queue depth, recent runs, DLQ."),
    **{name: ("jetcron.cli.services", f"COMMANDS.{name}",
              f"Run the {module} service in the foreground (settings from JETCRON_* env).")
       for name, module in (("api", "api"), ("trigger", "trigger"), ("placement", "placement"),
                            ("tracker", "run_tracker"), ("agent", "agent"), ("notifier", "notifier"),
                            ("gateway", "gateway"))},
}
"""Single commands: name -> (module, the function (a dotted path within it), its help's first line)."""


def load(name: str) -> Any:
    """The real command `name`, its module imported now."""
    # Mounted on a stand-in root as main's own were, so that they read as they did (no completion options).
    holder = typer.Typer(add_completion=False)
    if name in GROUPS:
        module, attribute, line = GROUPS[name]
        holder.add_typer(getattr(importlib.import_module(module), attribute), name=name, help=line)
    else:
        module, path, _ = COMMANDS[name]
        target: Any = importlib.import_module(module)
        for part in path.split("."):
            target = target[part] if isinstance(target, dict) else getattr(target, part)
        settings = {"allow_extra_args": False} if module == "jetcron.cli.services" else {}
        holder.command(name, context_settings=settings)(target)
        holder.callback()(lambda: None)  # a group of one, so that the command keeps its name
    return get_command(holder).commands[name]  # type: ignore[attr-defined]


class LazyGroup(TyperGroup):
    """Lists every command from the tables (for help) and imports a command's module only to run it."""

    def list_commands(self, ctx: Any) -> list[str]:
        return [*COMMANDS, *GROUPS]

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        found = self.commands.get(cmd_name)
        if found is not None:
            return found
        entry = GROUPS.get(cmd_name) or COMMANDS.get(cmd_name)
        if entry is None:
            return None
        # What the help lists: the name and its line, without importing the command's module.
        return TyperCommand(cmd_name, help=entry[2], short_help=entry[2])

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        if args and args[0] in (*COMMANDS, *GROUPS) and args[0] not in self.commands:
            self.commands[args[0]] = load(args[0])
        return super().resolve_command(ctx, args)


app = typer.Typer(cls=LazyGroup, no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False,
                  help="jetcron: a distributed job scheduler on NATS JetStream.")


def _print_version(wanted: bool) -> None:
    if wanted:
        from importlib.metadata import version as installed_version

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
    from jetcron.cli import identity

    ctx.obj = {"nats": nats, "target": identity.resolve(nats, creds, tls_ca)}


def everything() -> Any:
    """The root command with every command loaded: its whole tree, for tests that walk it."""
    root = get_command(app)
    for name in (*COMMANDS, *GROUPS):
        root.commands.setdefault(name, load(name))  # type: ignore[attr-defined]
    return root


def main() -> None:
    app()

"""One command per service: `jetcron api|trigger|placement|tracker|agent` runs it in the foreground."""

from __future__ import annotations

import importlib
from collections.abc import Callable

import typer

from jetcron.config import Settings

MODULES = {"api": "api", "trigger": "trigger", "placement": "placement", "tracker": "run_tracker", "agent": "agent",
           "notifier": "notifier", "gateway": "gateway"}


def _runner(command: str, module: str) -> Callable[..., None]:
    def run(
        ctx: typer.Context,
        allow_unsafe_storage: bool = typer.Option(
            False, "--allow-unsafe-storage", help="accept a server that does not fsync before ack (dev only)"
        ),
        agent_id: str | None = typer.Option(None, "--id", help="replica or agent id"),
        sim: bool = typer.Option(False, "--sim", help="agent: execute nothing, report success (scale tests)"),
        trace_console: bool = typer.Option(
            False, "--trace-console", help="print spans to stdout (unless OTEL_EXPORTER_OTLP_ENDPOINT is set)"
        ),
    ) -> None:
        from jetcron_services.runtime import serve

        url = (ctx.find_root().obj or {}).get("nats")
        overrides: dict[str, object] = {}
        if url:
            overrides["nats_url"] = url
        if allow_unsafe_storage:
            overrides["allow_unsafe_storage"] = True
        if agent_id:
            overrides["agent_id"] = agent_id
        if sim:
            overrides["agent_sim"] = True
        if trace_console:
            overrides["trace_console"] = True
        service = importlib.import_module(f"jetcron_services.{module}.service")
        serve(module, service.main, Settings(**overrides))  # type: ignore[arg-type]

    run.__doc__ = f"Run the {module} service in the foreground (settings from JETCRON_* env)."
    return run


COMMANDS = {command: _runner(command, module) for command, module in MODULES.items()}

"""`jetcron notifications list|redeliver`: a job's delivery log, and a parked delivery tried again."""

from __future__ import annotations

from typing import Any

import typer

from jetcron.cli.connection import client
from jetcron.cli.output import emit, output_option, usage
from jetcron.core.lifecycle.notify import Delivery

app = typer.Typer(no_args_is_help=True)
Output = output_option()
COLUMNS = ("delivery_id", "event", "target", "state", "tries", "last_try", "last_error")


def _row(d: Delivery) -> dict[str, Any]:
    last = d.attempts[-1] if d.attempts else None
    return {"delivery_id": d.delivery_id, "event": d.notice.event.value, "target": d.target, "state": d.state,
            "tries": len(d.attempts), "last_try": last.at.isoformat(timespec="seconds") if last else "",
            "last_error": last.error if last else ""}


@app.command("list")
def list_deliveries(ctx: typer.Context, job: str = typer.Option(..., "--job", help="the job's name"),
                    state: str | None = typer.Option(None, "--state", help="pending, delivered or parked"),
                    parked: bool = typer.Option(False, "--parked", help="only parked deliveries (--state parked)"),
                    limit: int = typer.Option(100, "--limit"), output: str = Output) -> None:
    """Every notification of a job's runs: its target, state and tries (json: each try's time and error)."""
    if parked and state is not None:
        usage(f"--parked is --state parked: give one of them (got --state {state})")
    with client(ctx) as c:
        page = c.notifications.list(job, state="parked" if parked else state, limit=limit)
    if output == "json":
        emit(page.items, output, COLUMNS)
        return
    emit([_row(d) for d in page.items], output, COLUMNS)


@app.command("redeliver")
def redeliver(ctx: typer.Context, delivery_id: str, output: str = Output) -> None:
    """Try a parked delivery again, with a fresh set of tries (its log is kept)."""
    with client(ctx) as c:
        record = c.notifications.redeliver(delivery_id)
    typer.echo(f"redelivery of {record.delivery_id} requested", err=True)
    emit([_row(record)], output, COLUMNS)

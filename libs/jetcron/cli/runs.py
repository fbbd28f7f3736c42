"""`jetcron runs|agents|dlq ...`."""

from __future__ import annotations

import sys

import typer

from jetcron.cli.connection import client
from jetcron.cli.output import RUN_COLUMNS, emit, output_option, run_view, usage
from jetcron.core.models import Priority

app = typer.Typer(no_args_is_help=True)
agents_app = typer.Typer(no_args_is_help=True)
dlq_app = typer.Typer(no_args_is_help=True)
Output = output_option()
SHORT = ("run_id", "state", "attempt", "agent", "scheduled_at", "finished_at", "exit_code", "reason")


@app.command("list")
def list_runs(
    ctx: typer.Context,
    job: str | None = typer.Option(None, "--job"),
    state: str | None = typer.Option(None, "--state"),
    queue: str | None = typer.Option(None, "--queue", help="only runs of this queue's jobs"),
    limit: int = typer.Option(100, "--limit"),
    cursor: str | None = typer.Option(None, "--cursor"),
    output: str = Output,
) -> None:
    """Runs (and skipped occurrences), filtered by job and state."""
    with client(ctx) as c:
        page = c.runs.list(job=job, state=state, queue=queue, limit=limit, cursor=cursor)
    emit([run_view(r) for r in page.items], output, SHORT)


@app.command("get")
def get(ctx: typer.Context, run_id: str, output: str = Output) -> None:
    with client(ctx) as c:
        run = c.runs.get(run_id)
    emit(run_view(run), output, (*RUN_COLUMNS, "trace_id"))


@app.command("cancel")
def cancel(
    ctx: typer.Context, run_id: str, reason: str | None = typer.Option(None, "--reason"), output: str = Output
) -> None:
    with client(ctx) as c:
        run = c.runs.cancel(run_id, reason=reason)
    emit(run_view(run), output, SHORT)


@app.command("set-priority")
def set_priority(
    ctx: typer.Context, run_id: str, priority: str = typer.Argument(..., help="critical, high, normal or low"),
    queue: str | None = typer.Option(None, "--queue", help="also move it to this queue of its tenant"),
    output: str = Output,
) -> None:
    """Move a run that has not started to another priority (and queue): it moves in the placement queue at once."""
    if priority not in {p.value for p in Priority}:
        usage(f"priority {priority!r}: must be one of critical, high, normal, low")
    with client(ctx) as c:
        run = c.runs.set_priority(run_id, priority, queue=queue)
    emit(run_view(run), output, SHORT)


@app.command("logs")
def logs(ctx: typer.Context, run_id: str, follow: bool = typer.Option(False, "--follow", "-f")) -> None:
    """Print a run's output; --follow streams it live until the run ends."""
    with client(ctx) as c:
        if follow:
            c.runs.get(run_id)  # a clear error for an unknown run before waiting on it
            for chunk in c.follow_logs(run_id):
                sys.stdout.buffer.write(chunk)
                sys.stdout.buffer.flush()
            return
        result = c.runs.logs(run_id)
    sys.stdout.write(result.output)


@app.command("finished")
def finished(ctx: typer.Context, minutes: int = typer.Option(60, "--minutes", help="how many minutes back (1-1440)"),
             output: str = Output) -> None:
    """Runs finished per minute, by outcome: the cluster's (admin), or your tenant's; minutes without any left out."""
    with client(ctx) as c:
        reply = c.runs.finished(minutes=minutes)
    outcomes = sorted({o for item in reply.items for o in item.counts})
    emit(reply, output, ("minute", "total", *outcomes), rows=lambda data: [
        {"minute": item["minute"], "total": sum(item["counts"].values()), **item["counts"]} for item in data["items"]],
         title=f"finished runs per minute since {reply.since:%Y-%m-%d %H:%M} UTC")


@agents_app.command("list")
def agents(
    ctx: typer.Context,
    limit: int = typer.Option(100, "--limit"),
    cursor: str | None = typer.Option(None, "--cursor", help="the last agent id of the previous page"),
    output: str = Output,
) -> None:
    """Registered agents by id, a page at a time (the next page's --cursor goes to stderr)."""
    with client(ctx) as c:
        page = c.agents.list(cursor=cursor, limit=limit)
    emit(page.items, output, ("agent_id", "cpu", "memory_mb", "gpus", "running", "labels", "limits", "draining"))
    if page.next_cursor:
        typer.echo(f"more: --cursor {page.next_cursor}", err=True)


@dlq_app.command("list")
def dlq_list(ctx: typer.Context, output: str = Output) -> None:
    with client(ctx) as c:
        page = c.dlq.list()
    emit([run_view(r) for r in page.items], output, SHORT)


@dlq_app.command("replay")
def dlq_replay(ctx: typer.Context, run_id: str, output: str = Output) -> None:
    """Run a dead run again as a new run with a fresh attempt series."""
    with client(ctx) as c:
        run = c.dlq.replay(run_id)
    emit(run_view(run), output, SHORT)

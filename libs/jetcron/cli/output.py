"""Printing results: JSON with -o json, a rich table otherwise; errors to stderr with the right exit code."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Collection, Sequence
from typing import Any, NoReturn

import typer
from rich.console import Console
from rich.table import Table

from jetcron.core.errors import JetcronError
from jetcron.wire.codec import plain

# Piped output keeps whole values (run ids, timestamps) instead of folding them to 80 columns.
console = Console(width=None if sys.stdout.isatty() else 220)
err_console = Console(stderr=True)

RUN_COLUMNS = (
    "run_id",
    "job",
    "state",
    "attempt",
    "agent",
    "scheduled_at",
    "started_at",
    "finished_at",
    "exit_code",
    "reason",
)


def run_view(record: Any) -> dict[str, Any]:
    """The run fields every consumer of `runs list/get -o json` can rely on (plus everything else)."""
    run: dict[str, Any] = plain(record)
    view = {key: run.get(key) for key in RUN_COLUMNS}
    view.update({k: v for k, v in run.items() if k not in view and k != "spec"})
    return view


def emit(
    data: Any,
    output: str,
    columns: Sequence[str] = (),
    rows: Callable[[Any], list[dict[str, Any]]] | None = None,
    title: str | None = None,
) -> None:
    data = plain(data)  # typed SDK replies (structs, datetimes) print with every field, those at defaults too
    if output == "json":
        sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")
        return
    items = rows(data) if rows else (data if isinstance(data, list) else [data])
    table = Table(title=title, show_lines=False)
    for col in columns:
        table.add_column(col)
    for item in items:
        table.add_row(*("" if item.get(c) is None else str(item.get(c)) for c in columns))
    console.print(table)


def formats(*names: str) -> Callable[[str], str]:
    """The -o option's check: a format this command prints, else exit 2 naming the option (before any request)."""

    def check(value: str) -> str:
        if value not in names:
            raise typer.BadParameter(f"{value!r}: must be {' or '.join(names)}")
        return value

    return check


def output_option(default: str = "table", *names: str, help: str = "table or json") -> Any:
    """`-o/--output`: table or json (or the formats named)."""
    return typer.Option(default, "-o", "--output", help=help, callback=formats(*(names or ("table", "json"))))


def given(ctx: typer.Context, skip: Collection[str] = ()) -> list[str]:
    """The options given on the command line, spelled as the user would name them (the long form), but those whose
    parameter is named in `skip`."""
    found = []
    for param in ctx.command.params:
        if param.param_type_name != "option" or param.name is None or param.name in skip:
            continue
        source = ctx.get_parameter_source(param.name)
        if source is not None and source.name == "COMMANDLINE":
            found.append(max(param.opts, key=len))
    return found


def fail(exc: Exception) -> NoReturn:
    if isinstance(exc, JetcronError):
        err_console.print(f"[red]error[/red] ({exc.code}): {exc}", markup=True, highlight=False)
        raise typer.Exit(2 if exc.code == "invalid" else 1)
    err_console.print(f"[red]error[/red]: {exc}")
    raise typer.Exit(1)


def usage(message: str) -> NoReturn:
    err_console.print(f"[red]usage error[/red]: {message}")
    raise typer.Exit(2)

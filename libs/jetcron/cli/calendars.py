"""`jetcron calendars ...`: named calendars that jobs skip (`jobs create --exclude NAME`) or keep to (`--only`)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import typer

from jetcron.cli.calendar_flags import CalendarFlags, apply_calendar_flags, new_calendar
from jetcron.cli.connection import client
from jetcron.cli.jobs import _read_spec
from jetcron.cli.output import emit, given, output_option, usage
from jetcron.core.errors import InvalidSpec
from jetcron.core.timing.ics import MAX_ICS_BYTES
from jetcron.wire.codec import plain

app = typer.Typer(no_args_is_help=True)
Output = output_option()
COLUMNS = ("name", "tenant", "tz", "version", "rules", "dates", "windows", "description")
FIRE_COLUMNS = ("local", "utc", "skipped", "until")


def _shown(values: list[Any], limit: int = 4) -> str:
    head = ", ".join(str(v) for v in values[:limit])
    return f"{head}, ... ({len(values)})" if len(values) > limit else head


def calendar_row(record: dict[str, Any]) -> dict[str, Any]:
    spec = record["spec"]
    return {"name": spec["name"], "tenant": spec.get("tenant", "default"), "tz": spec.get("tz", "UTC"),
            "version": record.get("version"), "rules": ", ".join(spec.get("rules", [])),
            "dates": _shown(spec.get("dates", [])), "windows": _shown(spec.get("windows", []), 2),
            "description": spec.get("description", "")}


def _ics_text(path: Path) -> str:
    try:
        if path.stat().st_size > MAX_ICS_BYTES:
            usage(f"--ics {path}: larger than {MAX_ICS_BYTES} bytes")
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        usage(f"cannot read --ics {path}: {exc}")


@app.command("update", help="Change a calendar: each flag given replaces that part (--ics FILE: the dates and "
             "windows), the rest stays. Takes effect from each job's next occurrence. --preview JOB shows that job's "
             "next fire times under the edited calendar and stores nothing.")
@app.command("create", help="Create a calendar: `jetcron calendars create NAME --dates 2026-12-25,2027-01-01 | --ics "
             "FILE | --rule weekdays | --window 'fri 16:00-mon 08:00' [--tz ZONE]`, or -f calendar.json.")
def create(
    ctx: typer.Context,
    name: str | None = typer.Argument(None, help="calendar name (letters, digits, '-', '_')"),
    file: Path | None = typer.Option(None, "-f", "--file", help="a JSON calendar (schemas/api/calendars.create)"),
    dates: list[str] = typer.Option([], "--dates", help="YYYY-MM-DD[,YYYY-MM-DD...]: whole days in the zone "
                                    "(update: replaces the dates)"),
    ics: Path | None = typer.Option(None, "--ics", help="an iCalendar file: its events' days and times (update: "
                                    "replaces the dates and windows)"),
    rule: list[str] = typer.Option([], "--rule", help="weekdays or weekends (update: replaces the rules)"),
    window: list[str] = typer.Option([], "--window", help="'fri 16:00-mon 08:00' (weekly), '22:00-06:00' (daily) or "
                                     "'START/END' (ISO 8601); repeatable (update: replaces the windows)"),
    tz: str | None = typer.Option(None, "--tz", help="IANA time zone (a new calendar: UTC)"),
    description: str | None = typer.Option(None, "--description"),
    tenant: str | None = typer.Option(None, "--tenant", help="the admin's: whose calendar"),
    preview: str | None = typer.Option(None, "--preview", help="update only: show JOB's next fire times with the "
                                       "edited calendar; nothing is stored"),
    count: int = typer.Option(10, "--count", help="with --preview: how many fire times"),
    output: str = Output,
) -> None:
    updating = ctx.info_name == "update"
    flags = CalendarFlags(dates=dates, ics=_ics_text(ics) if ics is not None else None, ics_name=f"--ics {ics}",
                          rules=rule, windows=window, tz=tz, description=description, tenant=tenant)
    now = datetime.now(UTC)
    calendar: dict[str, Any] | None = None
    if preview is not None and not updating:
        usage("--preview goes with calendars update")
    if preview is None and "--count" in given(ctx):
        usage("--count goes with --preview JOB (how many of its fire times to show)")
    if file is not None and (beside := given(ctx, skip=("file", "output", "preview", "count"))):
        usage(f"-f {file} replaces the whole calendar: put {', '.join(beside)} in the file instead")
    try:  # every flag is checked before anything is sent
        if file is not None:
            calendar = _read_spec(file)
            named = calendar.get("name") if isinstance(calendar, dict) else None
            if name and name != named:
                usage(f"NAME {name!r} is not the calendar {file} holds ({named!r})")
        elif not name:
            usage(f"give the NAME of the calendar to {ctx.info_name}")
        elif updating:
            if flags == CalendarFlags(ics_name=flags.ics_name) and preview is None:
                usage("nothing to change: give a flag, or -f calendar.json")
            apply_calendar_flags({}, flags, now)
        else:
            calendar = new_calendar(name, flags, now)
    except InvalidSpec as exc:
        usage(str(exc))
    with client(ctx) as c:
        expected = None
        if calendar is None:
            stored = plain(c.calendars.get(name or ""))
            calendar = apply_calendar_flags(stored["spec"], flags, now)
            expected = stored["version"]
        if preview is not None:
            shown = plain(c.calendars.preview(calendar, preview, count=count))
            if output == "json":
                emit(shown, output)
            else:
                emit(shown["next_fires"], output, FIRE_COLUMNS,
                     title=f"{preview}: next fire times with calendar {shown['calendar']} as edited (not stored)")
            return
        made = c.calendars.update(calendar, expected_version=expected) if updating else c.calendars.create(calendar)
        record = plain(made)
    emit(record, output, COLUMNS, rows=lambda r: [calendar_row(r)])


@app.command("get")
def get(ctx: typer.Context, name: str, output: str = Output) -> None:
    """A calendar: its zone, rules, every date and window."""
    with client(ctx) as c:
        record = plain(c.calendars.get(name))
    if output == "json":
        emit(record, output)
        return
    emit(record, output, COLUMNS, rows=lambda r: [calendar_row(r)])
    spec = record["spec"]
    if spec.get("dates"):
        emit([{"date": d} for d in spec["dates"]], output, ("date",), title="dates")
    if spec.get("windows"):
        emit([{"window": w} for w in spec["windows"]], output, ("window",), title="windows")


@app.command("list")
def list_calendars(
    ctx: typer.Context,
    limit: int = typer.Option(100, "--limit"),
    cursor: str | None = typer.Option(None, "--cursor"),
    output: str = Output,
) -> None:
    with client(ctx) as c:
        page = plain(c.calendars.list(limit=limit, cursor=cursor))
    emit(page["items"] if output == "json" else page, output, COLUMNS,
         rows=lambda p: [calendar_row(r) for r in p["items"]])


@app.command("delete")
def delete(ctx: typer.Context, name: str, output: str = Output) -> None:
    """Delete a calendar (refused while a job names it)."""
    with client(ctx) as c:
        record = plain(c.calendars.delete(name))
    emit(record, output, COLUMNS, rows=lambda r: [calendar_row(r)])

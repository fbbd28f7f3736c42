"""`jetcron jobs ...` and `jetcron schedule preview`."""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec
import typer

from jetcron.cli.connection import client
from jetcron.cli.output import emit, fail, run_view, usage
from jetcron.cli.parse import duration, instant
from jetcron.core import cron, dag
from jetcron.core.errors import InvalidSpec
from jetcron.core.models import Schedule

app = typer.Typer(no_args_is_help=True)
schedule_app = typer.Typer(no_args_is_help=True)
JOB_COLUMNS = ("name", "status", "schedule", "version", "tenant", "priority")
Output = typer.Option("table", "-o", "--output", help="table or json")


def _job_row(record: dict[str, Any]) -> dict[str, Any]:
    spec = record["spec"]
    sched = spec.get("schedule", {})
    what = (
        sched.get("cron")
        or (f"every {sched['every_seconds']:g}s" if sched.get("every_seconds") else None)
        or sched.get("at")
        or sched.get("kind", "now")
    )
    return {
        "name": spec["name"],
        "status": record.get("status"),
        "schedule": what,
        "version": record.get("version"),
        "tenant": spec.get("tenant"),
        "priority": spec.get("priority"),
    }


def _spec_from_flags(
    name: str,
    command: list[str],
    at: str | None,
    every: str | None,
    cron_expr: str | None,
    tz: str,
    cpu: float | None,
    memory: int | None,
    max_attempts: int | None,
    timeout: float | None,
    backoff_initial: str | None,
    backoff_max: str | None,
    backoff_multiplier: float | None,
    env: list[str],
    priority: str | None,
    tenant: str | None,
    depends_on: list[str],
    require: list[str],
    overlap: str | None,
    misfire: str | None,
    on_gap: str | None,
    on_fold: str | None,
    gpus: int | None,
) -> dict[str, Any]:
    if sum(x is not None for x in (at, every, cron_expr)) > 1:
        usage("give at most one of --at, --every, --cron")
    now = datetime.now(UTC)
    schedule: dict[str, Any] = {"kind": "now", "tz": tz}
    if at is not None and at.strip() != "now":
        schedule = {"kind": "at", "at": instant(at, now, "schedule.at").isoformat(), "tz": tz}
    elif every is not None:
        schedule = {"kind": "every", "every_seconds": duration(every, "schedule.every_seconds"), "tz": tz}
    elif cron_expr is not None:
        schedule = {"kind": "cron", "cron": cron_expr, "tz": tz}
    if on_gap:
        schedule["on_gap"] = on_gap
    if on_fold:
        schedule["on_fold"] = on_fold
    spec: dict[str, Any] = {"name": name, "command": command, "schedule": schedule}
    resources = {k: v for k, v in (("cpu", cpu), ("memory_mb", memory), ("gpus", gpus)) if v is not None}
    if resources:
        spec["resources"] = resources
    retry = {
        k: v
        for k, v in (
            ("max_attempts", max_attempts),
            ("initial_seconds", duration(backoff_initial, "retry.initial_seconds") if backoff_initial else None),
            ("max_delay_seconds", duration(backoff_max, "retry.max_delay_seconds") if backoff_max else None),
            ("multiplier", backoff_multiplier),
        )
        if v is not None
    }
    if retry:
        spec["retry"] = retry
    if timeout is not None:
        spec["timeout_seconds"] = timeout
    if env:
        spec["env"] = dict(_pair(e, "env") for e in env)
    if require:
        spec["require"] = dict(_pair(r, "require") for r in require)
    for key, value in (("priority", priority), ("tenant", tenant), ("overlap", overlap)):
        if value is not None:
            spec[key] = value
    if depends_on:
        spec["depends_on"] = depends_on
    if misfire:
        spec["misfire"] = {"kind": misfire}
    return spec


def _pair(text: str, field: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep:
        raise InvalidSpec(field, text, "must be NAME=VALUE")
    return key, value


@app.command("create")
def create(
    ctx: typer.Context,
    name: str | None = typer.Argument(None, help="job name"),
    command: list[str] | None = typer.Argument(None, help="argv after --"),
    file: Path | None = typer.Option(None, "-f", "--file", help="a JSON job spec"),
    at: str | None = typer.Option(None, "--at", help="now, +30s or an ISO 8601 instant"),
    every: str | None = typer.Option(None, "--every", help="interval, e.g. 5m"),
    cron_expr: str | None = typer.Option(None, "--cron", help="cron expression (5 fields, or 6 with seconds first)"),
    tz: str = typer.Option("UTC", "--tz"),
    cpu: float | None = typer.Option(None, "--cpu"),
    memory: int | None = typer.Option(None, "--memory", help="MB"),
    gpus: int | None = typer.Option(None, "--gpus"),
    max_attempts: int | None = typer.Option(None, "--max-attempts"),
    timeout: float | None = typer.Option(None, "--timeout", help="seconds"),
    backoff_initial: str | None = typer.Option(None, "--backoff-initial"),
    backoff_max: str | None = typer.Option(None, "--backoff-max"),
    backoff_multiplier: float | None = typer.Option(None, "--backoff-multiplier"),
    env: list[str] = typer.Option([], "--env", "-e", help="NAME=VALUE"),
    priority: str | None = typer.Option(None, "--priority"),
    tenant: str | None = typer.Option(None, "--tenant"),
    depends_on: list[str] = typer.Option([], "--depends-on"),
    require: list[str] = typer.Option([], "--require", help="label=value"),
    overlap: str | None = typer.Option(None, "--overlap"),
    misfire: str | None = typer.Option(None, "--misfire"),
    on_gap: str | None = typer.Option(None, "--on-gap"),
    on_fold: str | None = typer.Option(None, "--on-fold"),
    idempotency_key: str | None = typer.Option(None, "--idempotency-key"),
    output: str = Output,
    verb: str = typer.Option("jobs.create", hidden=True),
) -> None:
    """Create a job: `jetcron jobs create NAME [--at|--every|--cron ...] -- COMMAND [ARG...]` or `-f spec.json`."""
    try:
        if file is not None:
            try:
                spec = json.loads(file.read_text()) if str(file) != "-" else json.load(sys.stdin)
            except (OSError, json.JSONDecodeError) as exc:
                usage(f"cannot read {file}: {exc}")
        else:
            if not name or not command:
                usage("give NAME and a command after --, or -f spec.json")
            spec = _spec_from_flags(
                name,
                list(command),
                at,
                every,
                cron_expr,
                tz,
                cpu,
                memory,
                max_attempts,
                timeout,
                backoff_initial,
                backoff_max,
                backoff_multiplier,
                env,
                priority,
                tenant,
                depends_on,
                require,
                overlap,
                misfire,
                on_gap,
                on_fold,
                gpus,
            )
    except InvalidSpec as exc:
        usage(str(exc))
    payload: dict[str, Any] = {"spec": spec}
    if idempotency_key and verb == "jobs.create":
        payload["idempotency_key"] = idempotency_key
    with client(ctx) as c:
        record = c.call(verb, payload)
    for warning in record.get("warnings", []):
        typer.echo(f"warning: {warning}", err=True)
    emit(record, output, JOB_COLUMNS, rows=lambda r: [_job_row(r)])


@app.command("update", context_settings={"ignore_unknown_options": False})
def update(
    ctx: typer.Context,
    name: str = typer.Argument(...),
    command: list[str] | None = typer.Argument(None),
    file: Path | None = typer.Option(None, "-f", "--file"),
    at: str | None = typer.Option(None, "--at"),
    every: str | None = typer.Option(None, "--every"),
    cron_expr: str | None = typer.Option(None, "--cron"),
    tz: str = typer.Option("UTC", "--tz"),
    max_attempts: int | None = typer.Option(None, "--max-attempts"),
    timeout: float | None = typer.Option(None, "--timeout"),
    output: str = Output,
) -> None:
    """Replace a job's spec; takes effect from the next occurrence."""
    create(
        ctx,
        name,
        command,
        file,
        at,
        every,
        cron_expr,
        tz,
        None,
        None,
        None,
        max_attempts,
        timeout,
        None,
        None,
        None,
        [],
        None,
        None,
        [],
        [],
        None,
        None,
        None,
        None,
        None,
        output,
        "jobs.update",
    )


@app.command("list")
def list_jobs(
    ctx: typer.Context,
    limit: int = typer.Option(100, "--limit"),
    cursor: str | None = typer.Option(None, "--cursor"),
    output: str = Output,
) -> None:
    with client(ctx) as c:
        page = c.call("jobs.list", {"limit": limit, **({"cursor": cursor} if cursor else {})})
    emit(
        page["items"] if output == "json" else page,
        output,
        JOB_COLUMNS,
        rows=lambda p: [_job_row(r) for r in p["items"]],
    )


@app.command("get")
def get(ctx: typer.Context, name: str, output: str = Output) -> None:
    """A job with its next 5 fire times, in its zone and in UTC."""
    with client(ctx) as c:
        view = c.call("jobs.get", {"name": name})
    if output == "json":
        emit(view, output)
        return
    emit(view["job"], output, JOB_COLUMNS, rows=lambda r: [_job_row(r)])
    emit(view["next_fires"], output, ("local", "utc", "skipped"), title="next fire times")


def _simple(verb: str) -> Any:
    def command(ctx: typer.Context, name: str, output: str = Output) -> None:
        with client(ctx) as c:
            record = c.call(verb, {"name": name})
        emit(record, output, JOB_COLUMNS, rows=lambda r: [_job_row(r)])

    command.__doc__ = f"{verb.split('.')[1].capitalize()} a job."
    return command


for _verb in ("pause", "resume", "delete"):
    app.command(_verb)(_simple(f"jobs.{_verb}"))


@app.command("trigger")
def trigger(
    ctx: typer.Context,
    name: str,
    key: str | None = typer.Option(None, "--key", help="request key (idempotent)"),
    output: str = Output,
) -> None:
    """Run a job now, outside its schedule."""
    with client(ctx) as c:
        run = c.call("jobs.trigger", {"name": name, **({"key": key} if key else {})})
    emit(run_view(run), output, ("run_id", "job", "state", "scheduled_at"))


@app.command("backfill")
def backfill(
    ctx: typer.Context,
    name: str,
    start: str = typer.Option(..., "--from"),
    end: str = typer.Option(..., "--to"),
    rate: int | None = typer.Option(None, "--rate", help="runs started per second (default 100)"),
    output: str = Output,
) -> None:
    """Create runs for the past occurrences in [--from, --to), paced; one at a time unless overlap is allow."""
    now = datetime.now(UTC)
    try:
        payload: dict[str, object] = {
            "name": name,
            "from": instant(start, now, "from").isoformat(),
            "to": instant(end, now, "to").isoformat(),
        }
    except InvalidSpec as exc:
        usage(str(exc))
    if rate is not None:
        payload["rate"] = rate
    with client(ctx) as c:
        page = c.call("jobs.backfill", payload)
    emit([run_view(r) for r in page["items"]], output, ("run_id", "state", "scheduled_at"))


@app.command("graph")
def graph(ctx: typer.Context, name: str) -> None:
    """Print the job's DAG: its upstream and downstream jobs."""
    with client(ctx) as c:
        page = c.call("jobs.list", {"limit": 1000})
    edges = {r["spec"]["name"]: list(r["spec"].get("depends_on", [])) for r in page["items"]}
    if name not in edges:
        fail(RuntimeError(f"job {name!r} not found"))
    typer.echo(dag.render(edges, name))


@schedule_app.command("preview")
def preview(
    cron_expr: str | None = typer.Option(None, "--cron"),
    every: str | None = typer.Option(None, "--every"),
    tz: str = typer.Option("UTC", "--tz"),
    on_gap: str = typer.Option("shift", "--on-gap"),
    on_fold: str = typer.Option("first", "--on-fold"),
    start: str = typer.Option(..., "--from"),
    count: int = typer.Option(10, "--count"),
    output: str = Output,
) -> None:
    """The next N fire times from any instant, computed by the same code the trigger uses (no server)."""
    if (cron_expr is None) == (every is None):
        usage("give exactly one of --cron or --every")
    if not 1 <= count <= 10000:
        usage(f"--count must be from 1 to 10000 (got {count})")
    try:
        after = instant(start, datetime.now(UTC), "from")
        raw: dict[str, Any] = (
            {"kind": "cron", "cron": cron_expr}
            if cron_expr
            else {"kind": "every", "every_seconds": duration(every or "", "every"), "anchor": after.isoformat()}
        )
        schedule = msgspec.convert({**raw, "tz": tz, "on_gap": on_gap, "on_fold": on_fold}, Schedule, strict=False)
        cron.validate_schedule(schedule, created_at=after)
        fires = cron.next_fires(
            schedule, after - (datetime.resolution if every else datetime.resolution * 0), count, created_at=after
        )
    except (InvalidSpec, msgspec.ValidationError) as exc:
        usage(str(exc))
    zone = cron.zone(tz)
    rows = [{"local": o.at.astimezone(zone).isoformat(), "utc": o.at.isoformat(), "skipped": o.skipped} for o in fires]
    if output == "json":
        emit([r["local"] for r in rows if r["skipped"] is None], output)
        return
    emit(rows, output, ("local", "utc", "skipped"))

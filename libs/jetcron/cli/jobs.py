"""`jetcron jobs ...` and `jetcron schedule preview`."""

from __future__ import annotations

import json
import shlex
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec
import typer

from jetcron.cli.connection import client
from jetcron.cli.job_flags import JobFlags, apply_flags, new_spec
from jetcron.cli.output import emit, fail, given, output_option, run_view, usage
from jetcron.cli.parse import duration, instant, split_names
from jetcron.core.errors import InvalidSpec
from jetcron.core.models import RetryPolicy, Schedule
from jetcron.core.timing.schedule_words import schedule_words
from jetcron.sdk.errors import ApiError
from jetcron.wire.codec import plain

if TYPE_CHECKING:
    from jetcron.core.timing.calendar_time import Compiled
    from jetcron.core.timing.exclusions import JobCalendars

app = typer.Typer(no_args_is_help=True)
schedule_app = typer.Typer(no_args_is_help=True)
JOB_COLUMNS = ("name", "status", "schedule", "version", "tenant", "queue", "priority")
JOB_DETAIL = ("name", "status", "schedule", "tz", "command", "retries", "version", "tenant", "queue", "priority")
"""`jobs create`, `update` and `get`: one job, with what it runs, where in time and how it is retried."""
Output = output_option()


def _job_row(record: dict[str, Any]) -> dict[str, Any]:
    spec = record["spec"]
    schedule = _schedule_of(spec)
    return {
        "name": spec["name"],
        "status": record.get("status"),
        "schedule": schedule_words(schedule),  # the dashboard's words
        "tz": schedule.tz,
        "command": shlex.join(spec.get("command") or []),
        "retries": _retries(spec.get("retry")),
        "version": record.get("version"),
        "tenant": spec.get("tenant"),
        "queue": spec.get("queue", "default"),
        "priority": spec.get("priority"),
    }


def _schedule_of(spec: dict[str, Any]) -> Schedule:
    return msgspec.convert({k: v for k, v in (spec.get("schedule") or {}).items() if v is not None}, Schedule,
                           strict=False)


def _retries(raw: dict[str, Any] | None) -> str:
    """`3 attempts, 1s x2 up to 300s`: how often a failing job is tried, and the backoff between tries."""
    retry = msgspec.convert(raw or {}, RetryPolicy, strict=False)
    if retry.max_attempts <= 1:
        return "1 attempt, no retry"
    return (f"{retry.max_attempts} attempts, {retry.initial_seconds:g}s x{retry.multiplier:g} up to "
            f"{retry.max_delay_seconds:g}s")


@app.command("update", help="Change a job: each flag given (and a command after --) replaces that field, the rest "
             "stays; -f spec.json replaces the whole spec. Takes effect from the next occurrence.")
@app.command("create", help="Create a job: `jetcron jobs create NAME [--at|--every|--cron ...] -- COMMAND [ARG...]` "
             "or `-f spec.json`.")
def create(
    ctx: typer.Context,
    name: str | None = typer.Argument(None, help="job name"),
    command: list[str] | None = typer.Argument(None, help="argv after --"),
    file: Path | None = typer.Option(None, "-f", "--file", help="a JSON job spec"),
    at: str | None = typer.Option(None, "--at", help="now, +30s or an ISO 8601 instant"),
    every: str | None = typer.Option(None, "--every", help="interval, e.g. 5m"),
    cron_expr: str | None = typer.Option(None, "--cron", help="cron expression (5 fields, or 6 with seconds first)"),
    tz: str | None = typer.Option(None, "--tz", help="IANA time zone (a new job: UTC)"),
    cpu: float | None = typer.Option(None, "--cpu"),
    memory: int | None = typer.Option(None, "--memory", help="MB"),
    gpus: int | None = typer.Option(None, "--gpus"),
    max_attempts: int | None = typer.Option(None, "--max-attempts"),
    timeout: float | None = typer.Option(None, "--timeout", help="seconds"),
    backoff_initial: str | None = typer.Option(None, "--backoff-initial"),
    backoff_max: str | None = typer.Option(None, "--backoff-max"),
    backoff_multiplier: float | None = typer.Option(None, "--backoff-multiplier"),
    env: list[str] = typer.Option([], "--env", "-e", help="NAME=VALUE (update: replaces the whole environment)"),
    priority: str | None = typer.Option(None, "--priority"),
    tenant: str | None = typer.Option(None, "--tenant"),
    queue: str | None = typer.Option(None, "--queue", help="the tenant's named queue (a new job: default)"),
    depends_on: list[str] = typer.Option([], "--depends-on", help="update: replaces the whole list"),
    require: list[str] = typer.Option([], "--require", help="label=value (update: replaces every requirement)"),
    secret: list[str] = typer.Option([], "--secret", help="NAME of a secret given to the job as that variable "
                                     "(jetcron secrets set; update: replaces the list)"),
    overlap: str | None = typer.Option(None, "--overlap"),
    misfire: str | None = typer.Option(None, "--misfire"),
    on_gap: str | None = typer.Option(None, "--on-gap"),
    on_fold: str | None = typer.Option(None, "--on-fold"),
    notify_on: str | None = typer.Option(None, "--notify-on", help="EVENT[,EVENT]: dead, failed, blocked, succeeded, "
                                         "timed_out, start_missed, finish_missed, skipped (update: replaces the "
                                         "rules)"),
    webhook: str | None = typer.Option(None, "--webhook", help="URL that gets a signed JSON POST per event"),
    webhook_secret: str | None = typer.Option(None, "--webhook-secret", help="NAME of the tenant secret that "
                                              "signs webhook bodies"),
    notify_subject: str | None = typer.Option(None, "--notify-subject", help="publish events to "
                                              "jc.notify.<tenant>.SUBJECT"),
    notify_email: str | None = typer.Option(None, "--notify-email", help="email events to this address"),
    start_deadline: str | None = typer.Option(None, "--start-deadline", help="e.g. 5m: an occurrence not started "
                                              "by then is start_missed"),
    finish_deadline: str | None = typer.Option(None, "--finish-deadline", help="e.g. 1h: a run not finished that "
                                               "long after its start is finish_missed"),
    keep: str | None = typer.Option(None, "--keep", help="e.g. 7d: how long a finished run is kept (default: the "
                                    "tenant's, else the cluster's)"),
    keep_succeeded: int | None = typer.Option(None, "--keep-succeeded", help="keep at most N succeeded runs"),
    keep_failed: int | None = typer.Option(None, "--keep-failed", help="keep at most N failed, dead or blocked runs"),
    exclude: list[str] = typer.Option([], "--exclude", help="NAME[,NAME]: calendars whose days and hours the job "
                                      "skips, each skipped occurrence recorded with the calendar's name (update: "
                                      "replaces the list; '' clears it)"),
    only: list[str] = typer.Option([], "--only", help="NAME[,NAME]: calendars an occurrence must fall inside, every "
                                   "one, to run (update: replaces the list; '' clears it)"),
    apply_to_waiting: bool = typer.Option(False, "--apply-to-waiting", help="update: also move the job's runs "
                                          "that have not started to its new priority and queue"),
    idempotency_key: str | None = typer.Option(None, "--idempotency-key", help="create only"),
    output: str = Output,
) -> None:
    updating = ctx.info_name == "update"
    # An option this verb has no use for is refused, not dropped: the caller would believe it took effect.
    if updating and idempotency_key is not None:
        usage("--idempotency-key goes with jobs create: an update is applied once by the job's version, which it "
              "names (a retried update of a changed job is refused)")
    if not updating and apply_to_waiting:
        usage("--apply-to-waiting goes with jobs update: a new job has no runs waiting to move")
    if file is not None:
        beside = given(ctx, skip=("file", "output", "apply_to_waiting", "idempotency_key")) + (
            ["a command after --"] if command else [])
        if beside:
            usage(f"-f {file} replaces the whole spec: put {', '.join(beside)} in the file instead")
    flags = JobFlags(at=at, every=every, cron=cron_expr, tz=tz, on_gap=on_gap, on_fold=on_fold, cpu=cpu,
                     memory=memory, gpus=gpus, max_attempts=max_attempts, timeout=timeout,
                     backoff_initial=backoff_initial, backoff_max=backoff_max, backoff_multiplier=backoff_multiplier,
                     env=env, priority=priority, tenant=tenant, queue=queue, depends_on=depends_on, require=require,
                     secrets=secret, overlap=overlap, misfire=misfire, notify_on=notify_on, webhook=webhook,
                     webhook_secret=webhook_secret, notify_subject=notify_subject, notify_email=notify_email,
                     start_deadline=start_deadline, finish_deadline=finish_deadline, keep=keep,
                     keep_succeeded=keep_succeeded, keep_failed=keep_failed, exclude=exclude, only=only)
    now = datetime.now(UTC)
    payload: dict[str, Any] = {}
    try:  # every flag is checked before anything is sent
        if file is not None:
            payload["spec"] = _read_spec(file)
            named = payload["spec"].get("name") if isinstance(payload["spec"], dict) else None
            if name and name != named:
                usage(f"NAME {name!r} is not the job {file} holds ({named!r})")
        elif updating:
            if not name:
                usage("give the NAME of the job to update")
            if flags == JobFlags() and not command:
                usage("nothing to change: give a flag, a command after --, or -f spec.json")
            apply_flags({}, flags, now)
        else:
            if not name or not command:
                usage("give NAME and a command after --, or -f spec.json")
            payload["spec"] = new_spec(name, list(command), flags, now)
    except InvalidSpec as exc:
        usage(str(exc))
    with client(ctx) as c:
        expected = None
        if "spec" not in payload:
            # From the stored spec; its version makes the API refuse the change if the job changed meanwhile.
            stored = plain(c.jobs.get(name or "", count=0).job)
            payload["spec"] = apply_flags(stored["spec"], flags, now) | ({"command": command} if command else {})
            expected = stored["version"]
        made = c.jobs.update(payload["spec"], expected_version=expected,
                             apply_to_waiting=apply_to_waiting or None) if updating else \
            c.jobs.create(payload["spec"], idempotency_key=idempotency_key or None)
        record = plain(made)
    for warning in record.get("warnings", []):
        typer.echo(f"warning: {warning}", err=True)
    emit(record, output, JOB_DETAIL, rows=lambda r: [_job_row(r)])


def _read_spec(file: Path) -> Any:
    try:
        return json.loads(file.read_text()) if str(file) != "-" else json.load(sys.stdin)
    except (OSError, json.JSONDecodeError) as exc:
        usage(f"cannot read {file}: {exc}")


@app.command("list")
def list_jobs(
    ctx: typer.Context,
    limit: int = typer.Option(100, "--limit"),
    cursor: str | None = typer.Option(None, "--cursor"),
    queue: str | None = typer.Option(None, "--queue", help="only this queue's jobs"),
    output: str = Output,
) -> None:
    with client(ctx) as c:
        page = plain(c.jobs.list(limit=limit, cursor=cursor, queue=queue))
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
        view = plain(c.jobs.get(name))
    if output == "json":
        emit(view, output)
        return
    emit(view["job"], output, JOB_DETAIL, rows=lambda r: [_job_row(r)])
    fires = _noted(_schedule_of(view["job"]["spec"]), view["next_fires"])
    emit(fires, output, _fire_columns(fires), title="next fire times")
    waits = view.get("wait_timeout_seconds")
    if waits is not None:
        own = view["job"]["spec"].get("wait_timeout_seconds") is not None
        typer.echo(f"a run waiting on its upstream jobs is blocked after {waits:g} s"
                   f"{'' if own else ' (the default; set wait_timeout_seconds)'}")


def _fire_columns(rows: list[dict[str, Any]]) -> tuple[str, ...]:
    """`until` only when a calendar skips a run of occurrences (shown once)."""
    columns = ("local", "utc", "skipped", "until") if any(r.get("until") for r in rows) else ("local", "utc", "skipped")
    return (*columns, "note")


def _noted(schedule: Schedule, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each fire time with what a DST change does to it (a wall time that happens twice, or does not exist)."""
    from jetcron.core.timing import cron  # croniter: imported by the commands that compute fire times alone

    return [{**row, "note": None if row.get("skipped") else cron.dst_note(schedule, datetime.fromisoformat(row["utc"]))}
            for row in rows]


def _simple(verb: str) -> Any:
    def command(ctx: typer.Context, name: str, output: str = Output) -> None:
        with client(ctx) as c:
            record = plain(getattr(c.jobs, verb)(name))
        emit(record, output, JOB_COLUMNS, rows=lambda r: [_job_row(r)])

    command.__doc__ = f"{verb.capitalize()} a job."
    return command


for _verb in ("pause", "resume", "delete"):
    app.command(_verb)(_simple(_verb))


@app.command("trigger")
def trigger(
    ctx: typer.Context,
    name: str,
    key: str | None = typer.Option(None, "--key", help="request key (idempotent)"),
    output: str = Output,
) -> None:
    """Run a job now, outside its schedule."""
    with client(ctx) as c:
        run = plain(c.jobs.trigger(name, key=key))
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
        first, last = instant(start, now, "from"), instant(end, now, "to")
    except InvalidSpec as exc:
        usage(str(exc))
    with client(ctx) as c:
        page = plain(c.jobs.backfill(name, first, last, rate=rate))
    emit([run_view(r) for r in page["items"]], output, ("run_id", "state", "scheduled_at"))


@app.command("graph")
def graph(ctx: typer.Context, name: str) -> None:
    """Print the job's DAG: its upstream and downstream jobs."""
    with client(ctx) as c:
        page = plain(c.jobs.list(limit=1000))
    edges = {r["spec"]["name"]: list(r["spec"].get("depends_on", [])) for r in page["items"]}
    if name not in edges:
        fail(RuntimeError(f"job {name!r} not found"))
    from jetcron.core.lifecycle import dag

    typer.echo(dag.render(edges, name))


@schedule_app.command("preview")
def preview(
    ctx: typer.Context,
    cron_expr: str | None = typer.Option(None, "--cron"),
    every: str | None = typer.Option(None, "--every"),
    tz: str = typer.Option("UTC", "--tz"),
    on_gap: str = typer.Option("shift", "--on-gap"),
    on_fold: str = typer.Option("first", "--on-fold"),
    start: str = typer.Option(..., "--from", help="an ISO 8601 instant (or now, +DURATION); counted if it fires"),
    count: int = typer.Option(10, "--count"),
    exclude: list[str] = typer.Option([], "--exclude", help="NAME[,NAME]: skip what these calendars hold (read "
                                      "from the server)"),
    only: list[str] = typer.Option([], "--only", help="NAME[,NAME]: keep to these calendars (read from the server)"),
    output: str = Output,
) -> None:
    """The next N fire times at or after an instant, by the code the trigger uses (no server unless calendars are
    named); -o json: a list of ISO 8601 instants in the zone. The table also lists occurrences a DST gap
    (`--on-gap skip`) or a calendar skips, naming it, and notes a fire time a DST fold or gap concerns."""
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
        from jetcron.config import Settings  # pydantic's settings: a tenth of a second, for this command alone
        from jetcron.core.timing import cron

        cron.validate_schedule(schedule, created_at=after, min_interval_seconds=Settings().min_interval)
    except (InvalidSpec, msgspec.ValidationError) as exc:
        usage(str(exc))
    calendars = _calendars(ctx, split_names(exclude), split_names(only)) if exclude or only else None
    from jetcron.core.timing import exclusions

    rows = exclusions.preview(schedule, after, count, calendars=calendars)
    if output == "json":
        emit([r["local"] for r in rows if r["skipped"] is None], output)
        return
    noted = _noted(schedule, rows)
    emit(noted, output, _fire_columns(noted))


def _calendars(ctx: typer.Context, exclude: list[str], only: list[str]) -> JobCalendars:
    """The named calendars, read through the API (the caller's own tenant's)."""
    from jetcron.core.timing.calendar_time import compile_calendar
    from jetcron.core.timing.exclusions import JobCalendars

    with client(ctx) as c:
        def compiled(flag: str, name: str) -> tuple[str, Compiled | None]:
            try:
                return name, compile_calendar(c.calendars.get(name).spec)
            except ApiError as exc:
                if exc.code == "not_found":
                    usage(f"{flag} {name}: no such calendar (jetcron calendars list)")
                raise
        return JobCalendars(exclude=tuple(compiled("--exclude", n) for n in exclude),
                            only=tuple(compiled("--only", n) for n in only))

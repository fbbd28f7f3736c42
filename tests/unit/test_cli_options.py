"""Every option of every CLI command that sends a request either reaches that request or is refused with exit 2
naming it. The commands and their options are read from the CLI's own definition (typer's click tree), so an option
added and then parsed and dropped fails here; each command's requests go to a recorder (no server), answered like
tests/unit/test_verb_doors.py's. The root's --nats, --creds, --tls-ca and --version choose the connection, not a
request."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec
import pytest
from typer.testing import CliRunner

from jetcron.bus.memory import MemoryRpc
from jetcron.cli import services
from jetcron.cli.main import app as cli
from jetcron.cli.main import everything
from jetcron.core.models import JobRecord, JobSpec
from jetcron.core.timing.calendars import CalendarRecord, CalendarSpec
from jetcron.sdk.client import Client
from jetcron.sdk.errors import api_error
from jetcron.wire.api import ErrorBody, JobView

T0 = datetime(2026, 12, 1, tzinfo=UTC)
RUN = "nightly.20261201T000000000Z"
HOOK = "https://hooks.example.com/x"
PREVIEW = ["schedule", "preview", "--cron", "30 1 * * *", "--tz", "America/New_York", "--from",
           "2026-10-31T00:00:00Z", "--count", "3"]

BASES: dict[str, list[str]] = {
    "jobs create": ["jobs", "create", "nightly", "--", "true"],
    "jobs update": ["jobs", "update", "nightly", "--priority", "high"],
    "jobs list": ["jobs", "list"],
    "jobs get": ["jobs", "get", "nightly"],
    "jobs pause": ["jobs", "pause", "nightly"],
    "jobs resume": ["jobs", "resume", "nightly"],
    "jobs delete": ["jobs", "delete", "nightly"],
    "jobs trigger": ["jobs", "trigger", "nightly"],
    "jobs backfill": ["jobs", "backfill", "nightly", "--from", "2026-11-01T00:00:00Z", "--to", "2026-11-02T00:00:00Z"],
    "jobs graph": ["jobs", "graph", "nightly"],
    "runs list": ["runs", "list"],
    "runs get": ["runs", "get", RUN],
    "runs cancel": ["runs", "cancel", RUN],
    "runs set-priority": ["runs", "set-priority", RUN, "high"],
    "runs logs": ["runs", "logs", RUN],
    "runs finished": ["runs", "finished"],
    "agents list": ["agents", "list"],
    "dlq list": ["dlq", "list"],
    "dlq replay": ["dlq", "replay", RUN],
    "tenants set": ["tenants", "set", "acme", "--weight", "2"],
    "tenants list": ["tenants", "list"],
    "schedule preview": PREVIEW,
    "secrets set": ["secrets", "set", "TOKEN", "--tenant", "acme"],
    "secrets list": ["secrets", "list", "--tenant", "acme"],
    "secrets delete": ["secrets", "delete", "TOKEN", "--tenant", "acme"],
    "notifications list": ["notifications", "list", "--job", "nightly"],
    "notifications redeliver": ["notifications", "redeliver", "acme.nightly.x-0"],
    "calendars create": ["calendars", "create", "holidays", "--dates", "2026-12-25"],
    "calendars update": ["calendars", "update", "holidays", "--dates", "2027-01-01"],
    "calendars get": ["calendars", "get", "holidays"],
    "calendars list": ["calendars", "list"],
    "calendars delete": ["calendars", "delete", "holidays"],
    "tokens create": ["tokens", "create", "--tenant", "acme"],
    "tokens list": ["tokens", "list"],
    "tokens revoke": ["tokens", "revoke", "0123456789abcdef"],
}
"""Each command that sends requests, as a user would type it: every option is tried against this."""

NO_REQUEST: dict[str, str] = {
    "up": "runs the system on this machine: tests/e2e/test_up.py",
    "status": "reads the bus itself, no API verb: tests/integration/test_status.py checks -o and --agents",
    **{name: "runs one service in the foreground" for name in services.COMMANDS},
    "agents add": "mints a credential with the local keys: tests/unit/test_cli_agents.py",
    "agents revoke": "revokes with the local keys and pushes the account to the server: tests/unit/test_cli_agents.py",
    "tenants create": "mints a credential with the local keys: tests/unit/test_cli_tenants.py",
    "tenants revoke": "revokes with the local keys and pushes the account to the server",
    "deploy init": "writes a cluster's files: tests/integration/test_deploy_files.py",
    "certs init": "writes a CA and certificates",
    "certs client": "writes a client certificate",
}
"""Commands that send no API request, and why."""

SAMPLES: dict[str, list[str]] = {
    "--at": ["+1h"], "--every": ["10m"], "--cron": ["0 3 * * *"], "--tz": ["Europe/Berlin"],
    "--backoff-initial": ["5s"], "--backoff-max": ["1m"], "--env": ["A=1"], "--priority": ["low"],
    "--tenant": ["ops"], "--queue": ["batch"], "--depends-on": ["extract"], "--require": ["zone=eu"],
    "--secret": ["TOKEN"], "--overlap": ["skip"], "--misfire": ["all"], "--on-gap": ["skip"], "--on-fold": ["last"],
    "--notify-on": ["dead"], "--webhook": [HOOK], "--webhook-secret": ["HOOK_KEY"], "--notify-subject": ["ops"],
    "--notify-email": ["ops@example.com"], "--start-deadline": ["5m"], "--finish-deadline": ["1h"], "--keep": ["7d"],
    "--exclude": ["holidays"], "--only": ["holidays"], "--idempotency-key": ["key-1"], "--cursor": ["c1"],
    "--key": ["k1"], "--from": ["2026-10-01T00:00:00Z"], "--to": ["2026-11-03T00:00:00Z"], "--job": ["other"],
    "--state": ["running"], "--reason": ["why"], "--queue-quota": ["batch:cpu=2"], "--preemption": ["max=2"],
    "--queue-preemption": ["batch:off"], "--max-priority": ["high"], "--dates": ["2026-07-04"],
    "--rule": ["weekends"], "--window": ["22:00-06:00"], "--description": ["summer"], "--preview": ["nightly"],
    "--name": ["ci"],
}
"""A value for each option whose type says too little (an int option gets 7, a float 2.5, a flag none)."""

SAMPLE_FOR: dict[tuple[str, str], list[str]] = {
    ("notifications list", "--state"): ["parked"],
    ("runs list", "--state"): ["running"],
}

FILES: dict[str, str] = {
    "jobs": '{"name": "nightly", "command": ["./backup.sh"], "schedule": {"kind": "cron", "cron": "0 1 * * *"}}',
    "calendars": '{"name": "holidays", "dates": ["2026-12-26"]}',
    "--ics": "BEGIN:VCALENDAR\nVERSION:2.0\nPRODID:-//t//t//EN\nBEGIN:VEVENT\nUID:1\nDTSTAMP:20260101T000000Z\n"
             "DTSTART;VALUE=DATE:20261224\nSUMMARY:eve\nEND:VEVENT\nEND:VCALENDAR\n",
    "--from-file": "a value from a file\n",
}
"""What a path option's file holds: -f a job's or a calendar's JSON, by the command's group."""

BASE_FOR: dict[tuple[str, str], list[str]] = {
    # -f is the whole spec: nothing else names the job
    ("jobs create", "--file"): ["jobs", "create"],
    ("jobs update", "--file"): ["jobs", "update"],
    ("calendars create", "--file"): ["calendars", "create"],
    ("calendars update", "--file"): ["calendars", "update"],
    ("tokens create", "--admin"): ["tokens", "create"],
    ("schedule preview", "--every"): ["schedule", "preview", "--from", "2026-10-31T00:00:00Z", "--count", "3"],
    ("schedule preview", "--on-gap"): ["schedule", "preview", "--cron", "30 2 * * *", "--tz", "America/New_York",
                                       "--from", "2026-03-07T00:00:00Z", "--count", "3"],
    ("calendars update", "--count"): [*BASES["calendars update"], "--preview", "nightly"],
}
"""Where an option does something only beside another (or in place of the base's own), the base it is tried on."""
for _verb in ("create", "update"):
    _base = BASES["jobs create"][:3] if _verb == "create" else BASES["jobs update"]
    _tail = ["--", "true"] if _verb == "create" else []
    # A notification rule is --notify-on and one target: each is tried beside the other
    BASE_FOR[(f"jobs {_verb}", "--notify-on")] = [*_base, "--webhook", HOOK, *_tail]
    for _target in ("--webhook", "--notify-subject", "--notify-email"):
        BASE_FOR[(f"jobs {_verb}", _target)] = [*_base, "--notify-on", "dead", *_tail]
    BASE_FOR[(f"jobs {_verb}", "--webhook-secret")] = [*_base, "--notify-on", "dead", "--webhook", HOOK, *_tail]

REFUSED: dict[tuple[str, str], str] = {
    ("jobs create", "--apply-to-waiting"): "a new job has no waiting runs",
    ("jobs update", "--idempotency-key"): "an update is made once by the job's version",
    ("calendars create", "--preview"): "a preview shows an edit of a stored calendar",
    ("calendars create", "--count"): "the count of a preview",
}
"""Options a command takes (they share a function with a sibling command) but cannot use."""

OUTPUT_ONLY = {"--output"}
"""Options that shape what is printed, not what is asked: an unknown value is refused before any request."""

LOCAL = {"schedule preview"}
"""Commands that answer from this process (asking only for what they name): what they print is what they do."""

_JOB = JobRecord(spec=JobSpec(name="nightly", command=["true"], tenant="acme"), created_at=T0, updated_at=T0)
CANNED: dict[str, Any] = {
    "jobs.get": JobView(job=_JOB),
    "calendars.get": CalendarRecord(spec=CalendarSpec(name="holidays", tenant="acme", dates=["2026-12-25"]),
                                    created_at=T0, updated_at=T0),
}
"""The reads a command makes before its verb; every other verb answers not found (the request is what counts)."""


class Recording(Client):
    """A Client that keeps each request (verb and payload) and answers from CANNED, else not found."""

    def __init__(self) -> None:
        super().__init__(rpc=MemoryRpc())
        self.requests: list[tuple[str, dict[str, Any]]] = []

    async def call(self, verb: str, payload: dict[str, Any] | None = None) -> Any:
        self.requests.append((verb, dict(payload or {})))
        if verb in CANNED:
            return msgspec.to_builtins(CANNED[verb])
        raise api_error(ErrorBody(code="not_found", message=f"{verb}: answered by the test"))

    async def close(self) -> None:
        pass


def leaf_commands() -> Iterator[tuple[str, Any]]:
    """("jobs create", its click command) for every command of the CLI, from typer's own tree."""
    def walk(command: Any, path: list[str]) -> Iterator[tuple[str, Any]]:
        subs = getattr(command, "commands", None)
        if subs is None:
            yield " ".join(path), command
            return
        for name, sub in subs.items():
            yield from walk(sub, [*path, name])

    yield from walk(everything(), [])


def options_of(command: Any) -> list[Any]:
    return [p for p in command.params if p.param_type_name == "option"]


class Invoker:
    def __init__(self, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
        self.tmp = tmp_path
        self.last: Recording | None = None

        async def connect(*_: Any, **__: Any) -> Client:
            self.last = Recording()
            return self.last

        monkeypatch.setattr(Client, "connect", connect)
        monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
        monkeypatch.setenv("COLUMNS", "400")

    def __call__(self, argv: list[str]) -> tuple[int, list[tuple[str, dict[str, Any]]], str]:
        """Exit code, the requests sent, and what was printed (stdout and stderr, one line)."""
        self.last = None
        result = CliRunner().invoke(cli, ["--nats", "nats://127.0.0.1:1", *argv], input="a value\n")
        requests = self.last.requests if self.last is not None else []
        return result.exit_code, requests, " ".join(result.output.split())

    def value(self, command: str, option: Any) -> list[str]:
        name = max(option.opts, key=len)
        if option.is_flag:
            return []
        if (command, name) in SAMPLE_FOR:
            return SAMPLE_FOR[(command, name)]
        if name in SAMPLES:
            return SAMPLES[name]
        kind = option.type.name  # the option's parameter type: 'int', 'int range', 'float', 'path', 'str', ...
        if kind in ("int", "int range"):
            return ["7"]
        if kind == "float":
            return ["2.5"]
        if kind == "path":
            path = self.tmp / name.strip("-")
            path.write_text(FILES.get(name) or FILES[command.split()[0]])
            return [str(path)]
        raise AssertionError(f"{command} {name}: no sample value; add one to SAMPLES")


def with_option(base: list[str], names: tuple[str, ...], value: list[str]) -> list[str]:
    """`base` with the option set to `value`: in place of the base's own value, else before a `--` command."""
    argv = list(base)
    cut = argv.index("--") if "--" in argv else len(argv)
    for i, arg in enumerate(argv[:cut]):
        if arg in names:
            return [*argv[:i], arg, *value, *argv[i + 1 + len(value):]]
    return [*argv[:cut], max(names, key=len), *value, *argv[cut:]]


def test_every_command_is_walked_or_says_why_not() -> None:
    commands = {path for path, _ in leaf_commands()}
    assert set(BASES).isdisjoint(NO_REQUEST)
    assert commands == set(BASES) | set(NO_REQUEST), "a command must be in BASES (walked) or NO_REQUEST (why not)"
    known = {(path, max(o.opts, key=len)) for path, c in leaf_commands() for o in options_of(c)}
    for table in (SAMPLE_FOR, BASE_FOR, REFUSED):
        assert set(table) <= known, f"names an option no command has: {set(table) - known}"


CASES = [(path, option) for path, command in leaf_commands() if path in BASES for option in options_of(command)]


@pytest.mark.parametrize(("path", "option"), CASES, ids=[f"{p} {max(o.opts, key=len)}" for p, o in CASES])
def test_an_option_reaches_the_request_or_is_refused_naming_it(path: str, option: Any,
                                                              monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    invoke = Invoker(monkeypatch, tmp_path)
    name = max(option.opts, key=len)
    if name in OUTPUT_ONLY:
        code, requests, printed = invoke(with_option(BASES[path], tuple(option.opts), ["yaml"]))
        assert (code, requests) == (2, []) and name in printed, printed
        return
    base = BASE_FOR.get((path, name), BASES[path])
    argv = with_option(base, tuple(option.opts), invoke.value(path, option))
    code, requests, printed = invoke(argv)
    if (path, name) in REFUSED:
        assert code == 2 and name in printed, (argv, code, printed)
        assert requests == [], "a refused option is refused before anything is sent"
        return
    _, before, before_printed = invoke(base)
    assert code != 2, (argv, printed)
    if path in LOCAL:
        assert (requests, printed) != (before, before_printed), f"{path} {name} changes nothing it does"
    else:
        assert requests and requests != before, f"{path} {name} does not reach the request: {requests} {printed}"


@pytest.mark.parametrize(("argv", "named"), [
    pytest.param(["jobs", "create", "nightly", "--every", "5m", "-f", "SPEC"], "--every", id="job_file_and_a_flag"),
    pytest.param(["jobs", "create", "nightly", "-f", "SPEC", "--", "true"], "a command after --",
                 id="job_file_and_a_command"),
    pytest.param(["jobs", "update", "other", "-f", "SPEC"], "NAME 'other'", id="job_file_names_another_job"),
    pytest.param(["calendars", "create", "-f", "CAL", "--tz", "Europe/Berlin"], "--tz",
                 id="calendar_file_and_a_flag"),
    pytest.param(["calendars", "update", "holidays", "--dates", "2027-01-01", "--count", "3"], "--count",
                 id="count_without_preview"),
    pytest.param(["notifications", "list", "--job", "nightly", "--parked", "--state", "pending"], "--parked",
                 id="parked_and_a_state"),
    pytest.param(["tenants", "set", "acme", "--preemptible", "--preemption", "off"], "--preemptible",
                 id="preemptible_and_preemption"),
])
def test_options_that_cannot_go_together_are_refused_naming_them(argv: list[str], named: str,
                                                                 monkeypatch: pytest.MonkeyPatch,
                                                                 tmp_path: Path) -> None:
    invoke = Invoker(monkeypatch, tmp_path)
    (tmp_path / "spec.json").write_text(FILES["jobs"])
    (tmp_path / "cal.json").write_text(FILES["calendars"])
    argv = [{"SPEC": str(tmp_path / "spec.json"), "CAL": str(tmp_path / "cal.json")}.get(a, a) for a in argv]
    code, requests, printed = invoke(argv)
    assert (code, requests) == (2, []), printed
    assert named in printed, printed

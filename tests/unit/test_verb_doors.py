"""Every API verb (libs/jetcron/wire/verbs.py) has a CLI command and a REST operation, or a reason here for having none;
each CLI command and REST route said to offer a verb calls it (through the SDK, answered by a recorder here, not a
server), and every verb they name exists."""

from __future__ import annotations

import re
import warnings
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec
import pytest
from typer.testing import CliRunner

from jetcron.auth.tokens import TokenRecord, issue
from jetcron.bus.memory import MemoryRpc
from jetcron.cli.main import app as cli
from jetcron.core.models import JobRecord, JobSpec, Run, RunState
from jetcron.core.timing.calendars import CalendarRecord, CalendarSpec
from jetcron.sdk.client import Client
from jetcron.sdk.errors import api_error
from jetcron.wire.api import ErrorBody, JobView, Page
from jetcron.wire.verbs import VERBS
from jetcron_services.gateway.app import build_app
from jetcron_services.gateway.contract import OPS, Op
from jetcron_services.gateway.gate import Gate

T0 = datetime(2026, 12, 1, tzinfo=UTC)
RUN = "nightly.20261201T000000000Z"

NO_CLI = {
    "cluster.status": "`jetcron status` shows the leaders, shard holders and queues, and more, read from the bus "
                      "itself, so it answers while no api replica does",
    "submissions.get": "a request id is the publishing service's own (its Nats-Msg-Id): that service reads the "
                       "outcome with the SDK",
}
"""Verbs without a CLI command, and why."""

NO_REST = {
    "runs.finished": "the dashboard's overview chart (gateway.ui.pages) is its one reader over HTTP",
    "secrets.set": "a secret's value goes in over NATS only (`jetcron secrets`, the SDK): no HTTP body carries one",
    "secrets.list": "with secrets.set: a tenant's secrets are managed over NATS",
    "secrets.delete": "with secrets.set: a tenant's secrets are managed over NATS",
    "submissions.get": "the intake is NATS's (jc.submit.<tenant>): its publisher reads the outcome there",
    "tokens.create": "the REST API's tokens are issued over NATS with the admin's credential (`jetcron tokens`): "
                     "no bearer token mints another",
    "tokens.list": "with tokens.create: the bearer tokens are managed over NATS",
    "tokens.revoke": "with tokens.create: the bearer tokens are managed over NATS",
}
"""Verbs without a REST operation, and why."""

CLI_COMMANDS: dict[str, tuple[str, ...]] = {
    "jobs.create": ("jobs", "create", "nightly", "--every", "5m", "--", "true"),
    "jobs.update": ("jobs", "update", "nightly", "--priority", "high"),
    "jobs.get": ("jobs", "get", "nightly"),
    "jobs.list": ("jobs", "list"),
    "jobs.pause": ("jobs", "pause", "nightly"),
    "jobs.resume": ("jobs", "resume", "nightly"),
    "jobs.delete": ("jobs", "delete", "nightly"),
    "jobs.trigger": ("jobs", "trigger", "nightly"),
    "jobs.backfill": ("jobs", "backfill", "nightly", "--from", "2026-11-01T00:00:00Z", "--to", "2026-11-02T00:00:00Z"),
    "runs.get": ("runs", "get", RUN),
    "runs.list": ("runs", "list"),
    "runs.cancel": ("runs", "cancel", RUN),
    "runs.set_priority": ("runs", "set-priority", RUN, "high"),
    "runs.logs": ("runs", "logs", RUN),
    "runs.finished": ("runs", "finished"),
    "agents.list": ("agents", "list"),
    "dlq.list": ("dlq", "list"),
    "dlq.replay": ("dlq", "replay", RUN),
    "tenants.set": ("tenants", "set", "acme", "--weight", "2"),
    "tenants.list": ("tenants", "list"),
    "secrets.set": ("secrets", "set", "TOKEN", "--tenant", "acme"),
    "secrets.list": ("secrets", "list", "--tenant", "acme"),
    "secrets.delete": ("secrets", "delete", "TOKEN", "--tenant", "acme"),
    "notifications.list": ("notifications", "list", "--job", "nightly"),
    "notifications.redeliver": ("notifications", "redeliver", "acme.nightly.x-0"),
    "tokens.create": ("tokens", "create", "--tenant", "acme"),
    "tokens.list": ("tokens", "list"),
    "tokens.revoke": ("tokens", "revoke", "0123456789abcdef"),
    "calendars.create": ("calendars", "create", "holidays", "--dates", "2026-12-25"),
    "calendars.update": ("calendars", "update", "holidays", "--dates", "2027-01-01"),
    "calendars.get": ("calendars", "get", "holidays"),
    "calendars.list": ("calendars", "list"),
    "calendars.delete": ("calendars", "delete", "holidays"),
    "calendars.preview": ("calendars", "update", "holidays", "--dates", "2027-01-01", "--preview", "nightly"),
}
"""The CLI command that offers each verb, as a user would type it."""

_JOB = JobRecord(spec=JobSpec(name="nightly", command=["true"], tenant="acme"), created_at=T0, updated_at=T0)
_CALENDAR = CalendarRecord(spec=CalendarSpec(name="holidays", tenant="acme", dates=["2026-12-25"]), created_at=T0,
                           updated_at=T0)
CANNED: dict[str, Any] = {
    "jobs.get": JobView(job=_JOB),
    "runs.list": Page(items=[Run(run_id=f"acme.{RUN}", job="acme.nightly", tenant="acme", state=RunState.RUNNING,
                                 scheduled_at=T0, due_at=T0, created_at=T0)]),
    "calendars.get": _CALENDAR,
}
"""What the reads a door makes before its verb answer; every other verb answers not found."""


class Recording(Client):
    """A Client whose verbs are answered here: the reads a door makes first from CANNED, the rest not found."""

    def __init__(self) -> None:
        super().__init__(rpc=MemoryRpc())
        self.called: list[str] = []

    async def call(self, verb: str, payload: dict[str, Any] | None = None) -> Any:
        self.called.append(verb)
        if verb in CANNED:
            return msgspec.to_builtins(CANNED[verb])
        raise api_error(ErrorBody(code="not_found", message=f"{verb}: answered by the test"))

    async def close(self) -> None:
        pass


def test_every_verb_has_a_cli_command_or_a_reason() -> None:
    assert set(CLI_COMMANDS).isdisjoint(NO_CLI)
    assert set(CLI_COMMANDS) | set(NO_CLI) == set(VERBS)


def test_every_verb_has_a_rest_operation_or_a_reason() -> None:
    offered = {op.verb for op in OPS if op.verb is not None}
    assert offered <= set(VERBS), "an operation names a verb the contract does not have"
    assert offered.isdisjoint(NO_REST)
    assert offered | set(NO_REST) == set(VERBS)


@pytest.mark.parametrize("op", [op for op in OPS if op.verb is not None], ids=lambda op: op.operation_id)
def test_an_admin_operation_offers_an_admin_verb(op: Op) -> None:
    assert op.verb is not None and op.admin == VERBS[op.verb].admin


@pytest.mark.parametrize("verb", list(CLI_COMMANDS))
def test_the_cli_command_calls_its_verb(verb: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    recording = Recording()

    async def connect(*_: Any, **__: Any) -> Client:
        return recording

    monkeypatch.setattr(Client, "connect", connect)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    result = CliRunner().invoke(cli, ["--nats", "nats://127.0.0.1:1", *CLI_COMMANDS[verb]], input="a value\n")
    assert verb in recording.called, (recording.called, result.output)


_PATH = {"job_id": "nightly", "run_id": f"acme.{RUN}", "delivery_id": f"acme.{RUN}.dead-0-0", "tenant": "acme",
         "name": "holidays"}
_QUERY = {"preview": {"from": "2026-12-01T00:00:00Z", "cron": "0 * * * *"}, "previewCalendar": {"job": "nightly"}}


def _request(op: Op) -> dict[str, Any]:
    headers = {"If-Match": '"1"'} if any(p.name == "If-Match" and p.required for p in op.params) else {}
    url = re.sub(r"\{(\w+)\}", lambda m: _PATH[m.group(1)], op.path)
    out: dict[str, Any] = {"method": op.method.upper(), "url": url, "params": _QUERY.get(op.operation_id, {}),
                           "headers": headers}
    if op.example is not None:
        out["json"] = op.example
    return out


@pytest.mark.parametrize("op", [op for op in OPS if op.verb is not None], ids=lambda op: op.operation_id)
def test_the_rest_route_calls_its_verb(op: Op) -> None:
    from litestar.testing import TestClient

    tenant_token, tenant = issue("acme", "test", T0)
    admin_token, admin = issue(None, "test", T0)
    tokens: dict[str, TokenRecord] = {tenant.token_id: tenant, admin.token_id: admin}
    recording = Recording()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        app = build_app(Gate(lookup=tokens.get, client=lambda _: recording, ready=lambda: None))
    request = _request(op)
    request["headers"]["Authorization"] = f"Bearer {admin_token if op.admin else tenant_token}"
    with TestClient(app) as http:
        answer = http.request(**request)
    assert op.verb in recording.called, (recording.called, answer.status_code, answer.text)

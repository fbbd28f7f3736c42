"""Names, ids and keys are checked whole and in ASCII: every validator refuses a value with a trailing newline
("nightly\\n", which `re.match` with a `$` pattern takes) and one with a letter outside A-Z/a-z ("nïghtly",
"ключ", which str.isalnum takes), naming the field and the value; the same value without them passes."""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import msgspec
import pytest
from twin_support import twin_context

from jetcron.auth.tokens import issue, token_id_of, verify
from jetcron.core.errors import InvalidSpec, Misconfigured
from jetcron.core.models import JobSpec, NotifyEvent, NotifyRule, QueueQuota
from jetcron.core.placing.fairness import validate_queue_quotas
from jetcron.core.timing.calendars import CalendarRule, CalendarSpec, validate_calendar
from jetcron.core.validate import validate_spec
from jetcron_services.agent.host.offer import checked_agent_id
from jetcron_services.api import priorities
from jetcron_services.api.admission import Admission
from jetcron_services.api.call import Call, job_named
from jetcron_services.api.jobs import Jobs
from jetcron_services.api.notifications import Notifications
from jetcron_services.api.runs import run_id_of
from jetcron_services.api.secrets import Secrets
from jetcron_services.api.submissions import Submissions
from jetcron_services.api.tenants import Tenants
from jetcron_services.api.tokens import Tokens
from jetcron_services.gateway.gate import HttpProblem, idempotency_key

NOW = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)
ROOT = Path(__file__).resolve().parents[2]


def job(**fields: Any) -> None:
    validate_spec(JobSpec(**{"name": "nightly", "command": ["true"], **fields}), now=NOW, email_enabled=True)


def rule(**target: Any) -> None:
    job(notify=[NotifyRule(on=[NotifyEvent.DEAD], **target)])


def admin(**body: Any) -> Call:
    return Call(msgspec.json.encode(body), None)


async def created_with_key(key: str) -> None:
    ctx = twin_context()
    spec = {"name": "nightly", "command": ["true"], "schedule": {"kind": "cron", "cron": "0 9 * * *"}}
    await Jobs(ctx, Admission(ctx)).create(admin(spec=spec, idempotency_key=key))


def rest_key(key: str) -> None:
    idempotency_key(cast(Any, SimpleNamespace(headers={"idempotency-key": key})))


Check = Callable[[str], Any]
# (what is checked, how, a value it takes, the error, the field it names ("": its message names the value), the
# message)
VALIDATORS: list[tuple[str, Check, str, type[Exception], str, str]] = [
    ("job name", lambda v: job(name=v), "nightly", InvalidSpec, "name", "must be 1-63 letters"),
    ("job tenant", lambda v: job(tenant=v), "acme", InvalidSpec, "tenant", "must be 1-63 letters"),
    ("job queue", lambda v: job(queue=v), "batch", InvalidSpec, "queue", "must be 1-63 letters"),
    ("env name", lambda v: job(env={v: "1"}), "GREETING", InvalidSpec, "", "is not a valid variable name"),
    ("secret name", lambda v: job(secrets=[v]), "API_TOKEN", InvalidSpec, "secrets[0]",
     "is not a valid variable name"),
    ("image", lambda v: job(image=v), "alpine", InvalidSpec, "image", "is not a valid image reference"),
    ("require label", lambda v: job(require={"zone": v}), "eu", InvalidSpec, "require.zone", "labels are 1-63"),
    ("calendar named by a job", lambda v: job(exclude_calendars=[v]), "holidays", InvalidSpec,
     "exclude_calendars[0]", "must be 1-63 letters"),
    ("notify subject", lambda v: rule(subject=v), "ops.alerts", InvalidSpec, "notify[0].subject",
     "must be 1-8 dot-separated tokens"),
    ("notify email", lambda v: rule(email=v), "ops@example.com", InvalidSpec, "notify[0].email",
     "is not an email address"),
    ("notify secret", lambda v: rule(webhook="https://hooks.example.com/x", secret=v), "HOOK_KEY", InvalidSpec,
     "notify[0].secret", "is not a secret name"),
    ("calendar name", lambda v: validate_calendar(CalendarSpec(name=v, rules=[CalendarRule.WEEKENDS])), "holidays",
     InvalidSpec, "name", "must be 1-63 letters"),
    ("calendar tenant", lambda v: validate_calendar(CalendarSpec(name="h", tenant=v, rules=[CalendarRule.WEEKENDS])),
     "acme", InvalidSpec, "tenant", "must be 1-63 letters"),
    ("queue quota", lambda v: validate_queue_quotas({v: QueueQuota()}), "batch", InvalidSpec, "queues",
     "a queue name must be 1-63 letters"),
    ("job named by a caller", lambda v: job_named(v, None), "nightly", InvalidSpec, "name", "is not a valid job name"),
    ("run id", run_id_of, "nightly.20261204T181112345Z", InvalidSpec, "run_id", "is not a run id"),
    ("priority queue", lambda v: priorities.parse("high", v), "batch", InvalidSpec, "queue", "must be 1-63 letters"),
    ("secrets tenant", lambda v: Secrets(twin_context()).list(admin(tenant=v)), "acme", InvalidSpec, "tenant",
     "is required"),
    ("token tenant", lambda v: Tokens(twin_context()).create(admin(tenant=v)), "acme", InvalidSpec, "tenant",
     "must be 1-63 letters"),
    ("tenant policy", lambda v: Tenants(twin_context()).set(admin(tenant=v)), "acme", InvalidSpec, "tenant",
     "must be 1-63 letters"),
    ("submission request id", lambda v: Submissions(twin_context()).get(admin(request_id=v)), "req-1", InvalidSpec,
     "request_id", "must be 1-100 letters"),
    ("delivery id", lambda v: Notifications(twin_context()).redeliver(admin(delivery_id=v)),
     "acme.nightly.20261201T000000000Z.dead-1-0", InvalidSpec, "delivery_id", "is not a delivery id"),
    ("agent id", checked_agent_id, "agent-1", Misconfigured, "", "JETCRON_AGENT_ID=.*must be 1-63 letters"),
    ("idempotency key", created_with_key, "deploy-42", InvalidSpec, "idempotency_key",
     "must be 1-128 ASCII letters"),
    ("REST Idempotency-Key", rest_key, "deploy-42", HttpProblem, "Idempotency-Key",
     "Idempotency-Key: must be 1-128 ASCII letters"),
]
BAD: list[tuple[str, Callable[[str], str]]] = [
    ("trailing newline", lambda good: good + "\n"),
    ("a Latin letter outside ASCII", lambda good: "ï" + good[1:]),
    ("Cyrillic letters", lambda good: "ключ" + good[4:]),
]


async def outcome(check: Check, value: str) -> None:
    result = check(value)
    if inspect.isawaitable(result):
        await result


@pytest.mark.parametrize(("what", "check", "good", "error", "field", "message"), VALIDATORS,
                         ids=[v[0] for v in VALIDATORS])
@pytest.mark.parametrize("bad", [b[1] for b in BAD], ids=[b[0] for b in BAD])
async def test_a_name_with_a_trailing_newline_or_a_letter_outside_ascii_is_refused_naming_it(
        what: str, check: Check, good: str, error: type[Exception], field: str, message: str,
        bad: Callable[[str], str]) -> None:
    try:
        await outcome(check, good)
    except Exception as exc:  # a verb may go on to fail for want of a store, never for this value
        assert not (isinstance(exc, error) and re.search(message, str(exc))), f"{what}: {good!r} refused: {exc}"
    value = bad(good)
    with pytest.raises(error, match=message) as caught:
        await outcome(check, value)
    if field:
        assert (getattr(caught.value, "field", ""), getattr(caught.value, "value", None)) == (field, value)
    else:
        assert repr(value) in str(caught.value)


def test_a_token_with_a_trailing_newline_is_not_a_token() -> None:
    token, record = issue("acme", "ci", NOW)
    assert token_id_of(token) == record.token_id and verify(token, record)
    assert token_id_of(token + "\n") is None
    assert not verify(token + "\n", record)


def test_no_pattern_is_checked_with_match() -> None:
    # `$` matches before a trailing newline: a pattern checked with match() takes "nightly\n".
    sources = [p for top in ("libs", "services") for p in (ROOT / top).rglob("*.py")]
    found = [f"{p.relative_to(ROOT)}:{n}" for p in sources
             for n, line in enumerate(p.read_text().splitlines(), 1) if re.search(r"\b\w+_RE\.match\(", line)]
    assert found == []

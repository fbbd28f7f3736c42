"""The gateway's pure parts: bearer tokens, the design's body as a job spec, errors as HTTP problems."""

from __future__ import annotations

from datetime import UTC, datetime

import msgspec
import pytest

from jetcron.auth.tokens import issue, token_id_of, verify
from jetcron.core.models import JobRecord, JobSpec, JobStatus, Run, RunState
from jetcron.core.validate import decode_spec, validate_spec
from jetcron_services.gateway.design import CreateJob, job_spec, job_status, rest_field
from jetcron_services.gateway.problems import headers_for, problem, status_of

NOW = datetime(2026, 12, 3, tzinfo=UTC)


def test_a_token_verifies_against_its_record_only() -> None:
    token, record = issue("acme", "ci", NOW)
    other_token, other = issue("acme", "ci", NOW)
    assert token.startswith("jct_") and token_id_of(token) == record.token_id and record.tenant == "acme"
    assert verify(token, record) and not verify(token, other) and not verify(other_token, record)
    assert token.split("_", 2)[2] not in record.digest and len(record.digest) == 64  # only a digest is kept
    forged = token[:-1] + ("A" if token[-1] != "A" else "B")
    assert not verify(forged, record) and not verify("", record) and not verify(token, None)
    assert token_id_of("jct_short_x") is None and token_id_of("Bearer " + token) is None


def _spec(**body: object) -> dict[str, object]:
    return job_spec(msgspec.convert({"name": "n", "command": "echo hi", **body}, CreateJob))


def test_the_designs_body_becomes_a_valid_job_spec() -> None:
    spec = _spec(resources={"cpu": 2, "memory_gb": 1.5}, priority="high", queue="etl", schedule="0 */6 * * *",
                 retry_policy={"max_retries": 3, "backoff": "exponential"}, depends_on=["up"], timeout_seconds=60)
    decoded = decode_spec(spec)
    assert decoded.command == ["sh", "-c", "echo hi"] and decoded.resources.memory_mb == 1536
    assert decoded.resources.cpu == 2 and decoded.queue == "etl" and decoded.priority == "high"
    assert (decoded.schedule.kind, decoded.schedule.cron, decoded.schedule.tz) == ("cron", "0 */6 * * *", "UTC")
    assert (decoded.retry.max_attempts, decoded.retry.multiplier) == (4, 2.0)
    assert decoded.depends_on == ["up"] and decoded.timeout_seconds == 60
    validate_spec(decoded, now=NOW, jobs={"up": ("default", [])})


@pytest.mark.parametrize(("schedule", "kind"), [(None, "now"), ("2026-12-24T18:00:00Z", "at"),
                                                ("*/5 * * * *", "cron")])
def test_schedule_absent_is_now_an_instant_is_once_else_cron(schedule: str | None, kind: str) -> None:
    assert decode_spec(_spec(schedule=schedule)).schedule.kind == kind


def test_an_argv_command_is_kept_and_fixed_backoff_does_not_grow() -> None:
    spec = decode_spec(_spec(command=["python", "-c", "print(1)"], retry_policy={"backoff": "fixed"}))
    assert spec.command == ["python", "-c", "print(1)"] and spec.retry.multiplier == 1.0


@pytest.mark.parametrize(("ours", "theirs"), [
    ("spec.resources.memory_mb", "resources.memory_gb"), ("retry.max_attempts", "retry_policy.max_retries"),
    ("schedule.cron", "schedule"), ("spec.schedule", "schedule"), ("schedule.tz", "timezone"),
    ("spec.resources.cpu", "resources.cpu"), ("name", "name"), (None, None)])
def test_api_fields_are_named_as_the_rest_caller_sent_them(ours: str | None, theirs: str | None) -> None:
    assert rest_field(ours) == theirs


def test_a_jobs_status_is_its_latest_runs() -> None:
    spec = JobSpec(name="n", command=["true"], tenant="acme", queue="etl")
    job = JobRecord(spec=spec, created_at=NOW, updated_at=NOW, version=3)
    base = "https://jetcron.example.com"
    assert job_status(job, None, "acme", base=base).status == "queued"
    paused = msgspec.structs.replace(job, status=JobStatus.PAUSED)
    assert job_status(paused, None, "acme", base=base).status == "paused"
    run = Run(run_id="acme.n.20261203T000000000Z", job="acme.n", tenant="acme", state=RunState.RUNNING, attempt=2,
              agent="a-1", scheduled_at=NOW, due_at=NOW, created_at=NOW, started_at=NOW)
    view = job_status(job, run, "acme", base=base)
    assert (view.status, view.machine_id, view.attempts, view.queue, view.version) == ("running", "a-1", 2, "etl", 3)
    assert view.logs_url == f"{base}/api/v1/runs/acme.n.20261203T000000000Z/logs" and view.started_at == NOW.isoformat()
    assert job_status(job, msgspec.structs.replace(run, state=RunState.SCHEDULED), "acme", base=base).status == "queued"
    # a paused job is paused whatever its latest run does; the run's own state is still shown
    assert (job_status(paused, run, "acme", base=base).status, job_status(paused, run, "acme", base=base).run_state) \
        == ("paused", "running")
    # the admin names jobs by key
    assert job_status(job, None, None, base=base).job_id == "acme.n"
    assert job_status(job, None, "acme", base=base).job_id == "n"


@pytest.mark.parametrize(("code", "retryable", "status"), [
    ("invalid", False, 422), ("not_found", False, 404), ("conflict", True, 409), ("forbidden", False, 403),
    ("unauthorized", False, 401), ("unavailable", True, 503), ("idempotency_full", True, 503),
    ("storage_full", True, 503),
    ("internal", True, 503), ("internal", False, 500)])
def test_error_codes_are_the_statuses_http_users_expect(code: str, retryable: bool, status: int) -> None:
    assert status_of(code, retryable) == status


def test_a_busy_service_says_when_to_retry() -> None:
    assert headers_for(503, True) == {"Retry-After": "1"} and headers_for(404, False) == {}
    body = problem(422, "bad cpu", code="invalid", field="resources.cpu", value="lots")
    assert (body.title, body.type, body.field) == ("Unprocessable Content", "about:blank", "resources.cpu")

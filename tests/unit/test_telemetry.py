"""The HTTP port's routes, and the tracing helpers that keep one trace per run."""

from __future__ import annotations

import asyncio
import gc
import re

import pytest
from opentelemetry import trace
from prometheus_client import REGISTRY

from jetcron.telemetry.gc_pauses import GcPauses
from jetcron.telemetry.http import HealthServer
from jetcron.telemetry.logging import _add_trace_id
from jetcron.telemetry.tracing import context_from_trace_id, continue_trace, trace_id_of
from jetcron_services.runtime import tune_gc

TRACE_A = "0af7651916cd43dd8448eb211c80319c"
TRACE_B = "4bf92f3577b34da6a3ce929d0e0e4736"


def _headers(trace_id: str) -> dict[str, str]:
    return {"traceparent": f"00-{trace_id}-b7ad6b7169203331-01"}


@pytest.mark.parametrize(("path", "ready", "status"), [
    pytest.param("/livez", "starting", 200, id="alive_while_starting"),
    pytest.param("/readyz", "starting: consumers not ready yet", 503, id="not_ready_says_why"),
    pytest.param("/readyz", None, 200, id="ready"),
    pytest.param("/metrics?x=1", None, 200, id="metrics_ignores_query"),
    pytest.param("/other", None, 404, id="unknown_path"),
])
def test_routes(path: str, ready: str | None, status: int) -> None:
    server = HealthServer(lambda: ready)
    code, _, body = server.route("GET", path)
    assert code == status
    if code == 503:
        assert ready is not None and ready.encode() in body


def test_metrics_are_in_the_prometheus_text_format() -> None:
    code, content_type, body = HealthServer(lambda: None).route("GET", "/metrics")
    assert code == 200 and content_type.startswith("text/plain")
    assert b"# TYPE jetcron_queue_depth gauge" in body
    # (any value: another test in this process may have set the gauge)
    assert re.search(rb'^jetcron_queue_depth\{priority="critical"\} [0-9.e+-]+$', body, re.M)


async def test_serves_over_a_free_port() -> None:
    server = HealthServer(lambda: None, host="127.0.0.1")
    await server.start()
    try:
        assert server.port > 0 and server.url == f"http://127.0.0.1:{server.port}/metrics"
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(b"GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n")
        await writer.drain()
        response = await asyncio.wait_for(reader.read(), 5)
        writer.close()
        assert response.startswith(b"HTTP/1.1 200 OK") and response.endswith(b"ready\n")
    finally:
        await server.stop()


@pytest.mark.parametrize(("headers", "stored", "expected"), [
    pytest.param(_headers(TRACE_A), TRACE_A, TRACE_A, id="message_of_the_runs_trace"),
    pytest.param(_headers(TRACE_A), "", TRACE_A, id="no_stored_trace_follows_the_message"),
    pytest.param(_headers(TRACE_B), TRACE_A, TRACE_A, id="foreign_message_trace_loses_to_the_run"),
    pytest.param(None, TRACE_A, TRACE_A, id="no_headers_uses_the_stored_trace"),
    pytest.param(None, "", "", id="nothing_known_starts_a_new_trace"),
])
def test_continue_trace(headers: dict[str, str] | None, stored: str, expected: str) -> None:
    assert trace_id_of(continue_trace(headers, stored)) == expected


def test_log_lines_carry_the_current_trace_id() -> None:
    span = trace.NonRecordingSpan(trace.get_current_span(context_from_trace_id(TRACE_A)).get_span_context())
    with trace.use_span(span):
        assert _add_trace_id(None, "info", {"event": "x"})["trace_id"] == TRACE_A
    assert "trace_id" not in _add_trace_id(None, "info", {"event": "x"})


@pytest.mark.parametrize("dropping", [pytest.param(True, id="no_exporter_no_span_made"),
                                      pytest.param(False, id="span_made")])
def test_log_lines_inside_a_run_span_name_the_run_job_and_trace(
        dropping: bool, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    import json

    import structlog

    from jetcron.telemetry import tracing
    from jetcron.telemetry.logging import setup_logging
    from jetcron.telemetry.tracing import messaging_span, tracer

    monkeypatch.setattr(tracing, "_dropping", lambda: dropping)
    setup_logging("agent")
    try:
        with messaging_span(tracer("agent"), "process", "jc.assign.a1", parent=context_from_trace_id(TRACE_A),
                            run_id="job1.20260101T000000000Z", job="job1", attempt=1):
            structlog.get_logger("jetcron").info("child started")
        structlog.get_logger("jetcron").info("outside")
        first, second = (json.loads(line) for line in capsys.readouterr().out.splitlines())
    finally:
        structlog.reset_defaults()
        structlog.contextvars.clear_contextvars()
    assert first["service"] == "agent" and first["job"] == "job1"
    assert first["run_id"] == "job1.20260101T000000000Z"
    assert first["trace_id"] == TRACE_A
    assert "run_id" not in second and "job" not in second and "trace_id" not in second
    assert second["service"] == "agent"


def test_log_fields_of_a_nested_span_keep_the_outer_ones_it_does_not_name() -> None:
    from jetcron.telemetry.logging import LogFields, _add_log_fields

    with LogFields(run_id="r1", job="j"):
        with LogFields(run_id="r2"):
            assert _add_log_fields(None, "info", {}) == {"run_id": "r2", "job": "j"}
        assert _add_log_fields(None, "info", {}) == {"run_id": "r1", "job": "j"}
        assert _add_log_fields(None, "info", {"job": "mine"})["job"] == "mine"  # a field the line names wins
    assert _add_log_fields(None, "info", {}) == {}


@pytest.mark.parametrize("dropping", [pytest.param(True, id="no_exporter_no_span_made"),
                                      pytest.param(False, id="span_made")])
def test_what_is_published_inside_a_messaging_span_carries_the_runs_trace(
        dropping: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    from jetcron.telemetry import tracing

    monkeypatch.setattr(tracing, "_dropping", lambda: dropping)
    with tracing.messaging_span(tracing.tracer("agent"), "process", "jc.assign.a1",
                                parent=context_from_trace_id(TRACE_A), run_id="r1", job="j", attempt=1):
        inside = tracing.inject_headers({})
    assert inside["traceparent"].split("-")[1] == TRACE_A
    assert "traceparent" not in tracing.inject_headers({})  # the parent context is let go on exit


def test_a_span_with_no_trace_to_continue_starts_one_even_when_nothing_records_spans(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from jetcron.telemetry import tracing

    monkeypatch.setattr(tracing, "_dropping", lambda: True)
    seen = []
    for _ in range(2):
        with tracing.messaging_span(tracing.tracer("api"), "process", "jc.admin.jobs.create"):
            seen.append(tracing.current_trace_id())
            inside = tracing.inject_headers({})
        assert inside["traceparent"].split("-")[1] == seen[-1]
    assert all(len(t) == 32 and int(t, 16) != 0 for t in seen) and seen[0] != seen[1]
    assert tracing.current_trace_id() == ""  # let go on exit


def test_gc_pauses_are_timed_per_generation() -> None:
    now = [10.0]
    pauses = GcPauses(clock=lambda: now[0])
    before = REGISTRY.get_sample_value("jetcron_gc_pause_seconds_total", {"generation": "1"}) or 0.0
    for generation, began, ended in ((1, 10.0, 10.25), (2, 11.0, 12.5), (1, 13.0, 13.5)):
        now[0] = began
        pauses.on_gc("start", {"generation": generation})
        now[0] = ended
        pauses.on_gc("stop", {"generation": generation})
    assert pauses.totals() == {"gen0": 0.0, "gen1": 0.75, "gen2": 1.5}
    assert pauses.longest() == {"gen0": 0.0, "gen1": 0.5, "gen2": 1.5}
    assert REGISTRY.get_sample_value("jetcron_gc_pause_seconds_total", {"generation": "1"}) == before + 0.75


def test_gc_pauses_watch_the_real_collector_once_installed() -> None:
    pauses = GcPauses()
    pauses.install()
    pauses.install()  # once only
    try:
        gc.collect()
    finally:
        pauses.uninstall()
    assert pauses.totals()["gen2"] > 0
    gc.collect()  # uninstalled: no longer counted
    after = pauses.totals()["gen2"]
    gc.collect()
    assert pauses.totals()["gen2"] == after


def test_services_collect_cycles_less_often_and_never_walk_their_start_up_heap() -> None:
    before = gc.get_threshold()
    try:
        tune_gc((20_000, 20, 20))
        assert gc.get_threshold() == (20_000, 20, 20)
        assert gc.get_freeze_count() > 0  # what start-up built is out of every collection
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)


def test_a_kept_labelled_metric_is_the_one_prometheus_exports() -> None:
    from jetcron.telemetry import metrics

    kept = metrics.child(metrics.API_REQUESTS, verb="jobs.kept_test", outcome="ok")
    assert kept is metrics.child(metrics.API_REQUESTS, verb="jobs.kept_test", outcome="ok")
    assert kept is metrics.API_REQUESTS.labels(verb="jobs.kept_test", outcome="ok")
    assert kept is not metrics.child(metrics.API_REQUESTS, verb="jobs.kept_test", outcome="invalid")
    sample = ("jetcron_api_requests_total", {"verb": "jobs.kept_test", "outcome": "ok"})
    before = REGISTRY.get_sample_value(*sample) or 0
    metrics.child(metrics.API_REQUESTS, verb="jobs.kept_test", outcome="ok").inc()
    assert REGISTRY.get_sample_value(*sample) == before + 1
    with pytest.raises(ValueError, match="Incorrect label names"):
        metrics.child(metrics.API_REQUESTS, verb="jobs.kept_test")

"""One trace per run: api → trigger → placement → agent → run_tracker, retries included, and the run keeps its id."""

from __future__ import annotations

import asyncio
import contextlib
import importlib
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from harness import FAST_SETTINGS, wait_for
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from jetcron.bus.server import EmbeddedNats
from jetcron.config import Settings
from jetcron.sdk.client import Client
from jetcron.telemetry.tracing import setup_tracing, tracer
from jetcron_services.runtime import Context, boot, run

SERVICES = ("api", "trigger", "placement", "run_tracker", "agent")


def _settings(server: EmbeddedNats, data_dir: Path, **extra: Any) -> Settings:
    fast = {k.removeprefix("JETCRON_").lower(): v for k, v in FAST_SETTINGS.items()}
    return Settings(nats_url=server.url, nats_monitor_url=server.monitor_url, data_dir=str(data_dir),
                    metrics_host="127.0.0.1", **{**fast, **extra})


@pytest.fixture
def spans() -> Any:
    """Every span this process finishes from now on, kept in memory."""
    exporter = InMemorySpanExporter()
    setup_tracing("test", processor=SimpleSpanProcessor(exporter))
    yield exporter
    exporter.shutdown()  # stops collecting: the provider outlives the test


@pytest.fixture
async def system(nats_server: EmbeddedNats, tmp_path: Path, spans: InMemorySpanExporter) -> AsyncIterator[None]:
    """All five services in this event loop, each booted and run as `serve()` would."""
    contexts: list[Context] = []
    tasks: list[asyncio.Task[None]] = []
    for name in SERVICES:
        main: Callable[[Context], Awaitable[None]] = importlib.import_module(f"jetcron_services.{name}.service").main
        ctx = await boot(name, _settings(nats_server, tmp_path / "data",
                                         agent_id="agent-1" if name == "agent" else f"{name}-1"))
        contexts.append(ctx)
        tasks.append(asyncio.create_task(run(ctx, main)))
    try:
        await asyncio.wait_for(asyncio.gather(*(c.ready.wait() for c in contexts)), 30)
        yield
    finally:
        for ctx in contexts:
            ctx.stop.set()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), 20)
        for ctx in contexts:
            with contextlib.suppress(Exception):
                await ctx.link.close(drain=None, timeout=5)


def _service(span: ReadableSpan) -> str:
    scope = span.instrumentation_scope
    return scope.name.removeprefix("jetcron.") if scope is not None else ""


def _trace(span: ReadableSpan) -> str:
    assert span.context is not None
    return f"{span.context.trace_id:032x}"


async def _run_when(client: Client, job: str, state: str) -> dict[str, Any]:
    async def check() -> dict[str, Any] | None:
        page = await client.call("runs.list", {"job": job})
        return next((r for r in page["items"] if r["state"] == state), None)

    found: dict[str, Any] = await wait_for(check, 30, what=f"a {state} run of {job}")
    return found


async def test_one_trace_spans_submit_fire_place_execute_record(system: None, spans: InMemorySpanExporter,
                                                                client: Client) -> None:
    # Given every service running, when a `now` job is created through the SDK inside the caller's own span
    with tracer("user").start_as_current_span("user submits") as submit:
        await client.call("jobs.create", {"spec": {"name": "traced", "command": ["true"],
                                                   "schedule": {"kind": "now"}}})
    trace_id = f"{submit.get_span_context().trace_id:032x}"
    run = await _run_when(client, "traced", "succeeded")

    # Then the creating request, the fire, the placement, the execution and each recorded report share its trace
    # named after the subject it was asked on: the admin subject, for an SDK without a tenant credential
    create = [sp for sp in spans.get_finished_spans() if sp.name == "process jc.admin.jobs.create"]
    assert len(create) == 1
    assert _trace(create[0]) == trace_id

    def of_run() -> list[ReadableSpan]:
        return [sp for sp in spans.get_finished_spans() if (sp.attributes or {}).get("jetcron.run_id") == run["run_id"]]

    await wait_for(lambda: {"run_tracker"} <= {_service(sp) for sp in of_run() if "finished" in sp.name}, 10,
                   what="the tracker's span for the finished report")
    by_service: dict[str, set[str]] = {}
    for sp in of_run():
        by_service.setdefault(_service(sp), set()).add(_trace(sp))
    assert {"trigger", "placement", "agent", "run_tracker"} <= set(by_service), by_service
    assert all(ids == {trace_id} for ids in by_service.values()), (trace_id, by_service)
    # And the run record keeps the trace id (`jetcron runs get` prints it)
    assert run["trace_id"] == trace_id

    # Spans follow the OpenTelemetry messaging conventions
    execute = next(sp for sp in of_run() if _service(sp) == "agent")
    attrs = dict(execute.attributes or {})
    assert execute.name == "process jc.assign.agent-1"
    assert attrs["messaging.system"] == "nats"
    assert attrs["messaging.destination.name"] == "jc.assign.agent-1"
    assert attrs["messaging.operation.type"] == "process"
    fire = next(sp for sp in of_run() if _service(sp) == "trigger")
    assert fire.name == "publish jc.place.normal" and dict(fire.attributes or {})["messaging.operation.type"] == "send"


async def test_a_retry_is_a_further_span_in_the_same_trace(system: None, spans: InMemorySpanExporter,
                                                           client: Client, tmp_path: Path) -> None:
    # Given a job whose first attempt fails and whose second succeeds
    mark = tmp_path / "first-attempt-ran"
    script = f"test -e {mark} || {{ touch {mark}; exit 1; }}"
    await client.call("jobs.create", {"spec": {
        "name": "flaky", "command": ["sh", "-c", script], "schedule": {"kind": "now"},
        "retry": {"max_attempts": 3, "initial_seconds": 0.2, "jitter": 0}}})
    # When it runs to success
    run = await _run_when(client, "flaky", "succeeded")
    assert run["attempt"] == 2

    # Then both attempts' executions, and the reconciler's retry between them, are spans of the run's trace
    def of_run() -> list[ReadableSpan]:
        return [sp for sp in spans.get_finished_spans() if (sp.attributes or {}).get("jetcron.run_id") == run["run_id"]]

    executions = {dict(sp.attributes or {})["jetcron.attempt"]: _trace(sp) for sp in of_run()
                  if _service(sp) == "agent"}
    assert executions == {1: run["trace_id"], 2: run["trace_id"]}
    retries = [sp for sp in of_run() if sp.name == "reconcile retry"]
    assert retries and all(_trace(sp) == run["trace_id"] for sp in retries)

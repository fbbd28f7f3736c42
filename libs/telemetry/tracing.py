"""Tracing: W3C traceparent carried in NATS headers so one trace spans every service."""

from __future__ import annotations

import os
from collections.abc import Mapping

from opentelemetry import context, propagate, trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter

_configured = False


def setup_tracing(service: str, *, console: bool = False, exporter: SpanExporter | None = None) -> None:
    """OTLP when OTEL_EXPORTER_OTLP_ENDPOINT is set, console by flag, an explicit exporter for tests."""
    global _configured
    provider = TracerProvider(resource=Resource.create({"service.name": f"jetcron-{service}"}))
    chosen = exporter
    if chosen is None and os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
        try:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
            chosen = OTLPSpanExporter()
        except ImportError:  # the otlp extra is optional
            chosen = None
    if chosen is None and console:
        chosen = ConsoleSpanExporter()
    if chosen is not None:
        provider.add_span_processor(BatchSpanProcessor(chosen))
    if not _configured:
        trace.set_tracer_provider(provider)
        _configured = True


def tracer(name: str) -> trace.Tracer:
    return trace.get_tracer(f"jetcron.{name}")


def inject_headers(headers: dict[str, str]) -> dict[str, str]:
    """Add the current span's traceparent (no-op outside a span)."""
    propagate.inject(headers)
    return headers


def extract_context(headers: Mapping[str, str] | None) -> context.Context:
    return propagate.extract(dict(headers or {}))


def context_from_trace_id(trace_id: str) -> context.Context:
    """Continue a stored trace (the run record keeps its trace id) when no message carries it."""
    if not trace_id or len(trace_id) != 32:
        return context.Context()
    carrier = {"traceparent": f"00-{trace_id}-{os.urandom(8).hex()}-01"}
    return propagate.extract(carrier)


def current_trace_id() -> str:
    ctx = trace.get_current_span().get_span_context()
    return f"{ctx.trace_id:032x}" if ctx.is_valid else ""

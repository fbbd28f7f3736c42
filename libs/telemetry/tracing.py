"""Tracing: W3C traceparent carried in NATS headers so one trace spans every service."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager

import structlog
from opentelemetry import context, propagate, trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter
from opentelemetry.sdk.trace.sampling import Decision, Sampler, SamplingResult
from opentelemetry.trace.span import TraceState
from opentelemetry.util.types import Attributes

from jetcron.telemetry.logging import LogFields


class _RecordWhenExported(Sampler):
    """Record spans only once something exports them.

    Without an exporter a recorded span is all cost: its attribute checks alone are ~70 us, and at a herd's
    instant span creation was half of an agent's CPU. A dropped span still has its trace id and span id and
    still travels as traceparent, so run records and log lines keep their trace ids either way.
    """

    def __init__(self) -> None:
        self.on = False

    def should_sample(self, parent_context: context.Context | None, trace_id: int, name: str,
                      kind: trace.SpanKind | None = None, attributes: Attributes = None,
                      links: Sequence[trace.Link] | None = None, trace_state: TraceState | None = None,
                      ) -> SamplingResult:
        if self.on:
            return SamplingResult(Decision.RECORD_AND_SAMPLE, attributes, trace_state)
        return SamplingResult(Decision.DROP, None, trace_state)

    def get_description(self) -> str:
        return "RecordWhenExported"


_provider: TracerProvider | None = None
_sampler = _RecordWhenExported()

# OpenTelemetry messaging conventions: the operation's name as it reads, and its type from the fixed set.
_OPERATION_TYPE = {"publish": "send", "send": "send", "create": "create", "receive": "receive", "process": "process"}


def _env_exporter(console: bool) -> SpanExporter | None:
    if os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
        try:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
            exporter: SpanExporter = OTLPSpanExporter()
            return exporter
        except ImportError:  # the otlp extra is optional: say so rather than drop spans silently
            structlog.get_logger("jetcron").warning(
                "OTEL_EXPORTER_OTLP_ENDPOINT is set but the otlp extra is missing: pip install 'jetcron[otlp]'")
    return ConsoleSpanExporter() if console else None


def setup_tracing(service: str, *, console: bool = False, exporter: SpanExporter | None = None,
                  processor: SpanProcessor | None = None) -> None:
    """OTLP when OTEL_EXPORTER_OTLP_ENDPOINT is set, console by flag, otherwise off; an explicit exporter or
    processor (tests: an in-memory exporter behind a SimpleSpanProcessor) is added as given.

    The first call installs the process's provider; later calls (several services in one process, or a test
    that configured its exporter before the services boot) add only an explicit exporter or processor.
    """
    global _provider
    first = _provider is None
    if _provider is None:
        existing = trace.get_tracer_provider()
        if isinstance(existing, TracerProvider):
            _provider = existing
        else:
            _provider = TracerProvider(resource=Resource.create({"service.name": f"jetcron-{service}"}),
                                       sampler=_sampler)
            trace.set_tracer_provider(_provider)
    chosen = processor
    if chosen is None:
        picked = exporter or (_env_exporter(console) if first else None)
        chosen = BatchSpanProcessor(picked) if picked is not None else None
    if chosen is not None:
        _provider.add_span_processor(chosen)
        _sampler.on = True


def _dropping() -> bool:
    """This process's provider is ours and no exporter or processor was added: every span would be dropped."""
    return _provider is not None and _provider.sampler is _sampler and not _sampler.on


def flush_tracing(timeout_ms: int = 5000) -> None:
    """Send what the batch exporters still hold (at service exit)."""
    if _provider is not None:
        _provider.force_flush(timeout_ms)


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


def trace_id_of(ctx: context.Context) -> str:
    span_context = trace.get_current_span(ctx).get_span_context()
    return f"{span_context.trace_id:032x}" if span_context.is_valid else ""


def continue_trace(headers: Mapping[str, str] | None, trace_id: str = "") -> context.Context:
    """The message's own parent span when it belongs to `trace_id` (or none is known); else the stored trace.

    A run keeps one trace across attempts, so a message sent outside any span (a re-drive) still lands in it.
    """
    ctx = extract_context(headers)
    carried = trace_id_of(ctx)
    if carried and (not trace_id or carried == trace_id):
        return ctx
    return context_from_trace_id(trace_id)


def link_to(trace_id: str) -> list[trace.Link]:
    """A link to another trace (a recurring job's occurrence points at the request that created the job)."""
    span_context = trace.get_current_span(context_from_trace_id(trace_id)).get_span_context()
    return [trace.Link(span_context)] if span_context.is_valid else []


def _new_root(base: context.Context | None) -> context.Context:
    """A context holding a fresh, valid, non-recording root span: ids only, nothing recorded or exported."""
    root = trace.NonRecordingSpan(trace.SpanContext(
        trace_id=int.from_bytes(os.urandom(16), "big") or 1, span_id=int.from_bytes(os.urandom(8), "big") or 1,
        is_remote=False, trace_flags=trace.TraceFlags(trace.TraceFlags.SAMPLED)))
    return trace.set_span_in_context(root, base)


def current_trace_id() -> str:
    ctx = trace.get_current_span().get_span_context()
    return f"{ctx.trace_id:032x}" if ctx.is_valid else ""


@contextmanager
def messaging_span(service_tracer: trace.Tracer, operation: str, destination: str, *,
                   parent: context.Context | None = None, kind: trace.SpanKind | None = None,
                   run_id: str = "", job: str = "", attempt: int | None = None,
                   links: Sequence[trace.Link] = ()) -> Iterator[trace.Span]:
    """A span named and described by the OpenTelemetry messaging conventions (`process jc.event.finished`),
    with run_id, job and trace_id bound into every log line written inside it."""
    if _dropping():
        # Nothing records spans in this process: skip making one (sampler, ids, attributes: a fifth of an
        # agent's CPU while a herd starts). The parent's context is still made current, so what is published
        # inside carries the same trace as before, and log lines keep their trace id (logging._add_trace_id).
        # With no trace to continue, a new one starts here all the same: every run record gets a valid trace id,
        # so log lines have one and a tracing backend added later finds the runs it is asked about.
        if not trace_id_of(parent if parent is not None else context.get_current()):
            parent = _new_root(parent)
        token = context.attach(parent) if parent is not None else None
        try:
            with LogFields(run_id=run_id, job=job):
                yield trace.get_current_span()
        finally:
            if token is not None:
                context.detach(token)
        return
    if kind is None:
        kind = trace.SpanKind.PRODUCER if operation in ("publish", "send", "create") else trace.SpanKind.CONSUMER
    attributes: dict[str, str | int] = {
        "messaging.system": "nats", "messaging.destination.name": destination,
        "messaging.operation": operation, "messaging.operation.name": operation,
        "messaging.operation.type": _OPERATION_TYPE.get(operation, operation),
    }
    if run_id:
        attributes["jetcron.run_id"] = run_id
    if job:
        attributes["jetcron.job"] = job
    if attempt is not None:
        attributes["jetcron.attempt"] = attempt
    with service_tracer.start_as_current_span(f"{operation} {destination}", context=parent, kind=kind,
                                              attributes=attributes, links=links) as span, \
            LogFields(run_id=run_id, job=job):
        yield span

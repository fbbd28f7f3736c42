"""Tracing: W3C traceparent carried in NATS headers so one trace spans every service."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager

import structlog
from opentelemetry import baggage, context, propagate, trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter
from opentelemetry.sdk.trace.sampling import Decision, Sampler, SamplingResult
from opentelemetry.trace.span import TraceState
from opentelemetry.util.types import Attributes

from jetcron.telemetry.logging import LogFields
from jetcron.wire.subjects import HDR_TRACEPARENT


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


# The fields of the SDK's default propagators (W3C trace context and baggage). While the global propagator
# reads and writes nothing else, a plain traceparent is handled here in a few microseconds instead of the
# propagators' generic path, several times as long per message (docs/benchmarks-history.md); a message or
# context with anything more (tracestate, baggage, another version or form) still goes through them.
_W3C_FIELDS = frozenset({HDR_TRACEPARENT, "tracestate", "baggage"})
_TRACEPARENT = re.compile(r"00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})")
_TRACE_ID = re.compile(r"[0-9a-f]{32}")
_NO_TRACE, _NO_SPAN = "0" * 32, "0" * 16
_checked: tuple[object, bool] | None = None


def _w3c_only() -> bool:
    """The global propagator carries only what the plain path writes (judged once per propagator)."""
    global _checked
    textmap = propagate.get_global_textmap()
    if _checked is None or _checked[0] is not textmap:
        _checked = (textmap, textmap.fields <= _W3C_FIELDS)
    return _checked[1]


class _Parent(trace.NonRecordingSpan):
    """A non-recording parent span known by its traceparent. It keeps the string, since formatting the ids again
    for every message sent in its context costs more than the rest of the injection, and makes its span context
    only when asked: with nothing exporting spans, only a log line asks."""

    def __init__(self, traceparent: str, *, remote: bool) -> None:
        # No super().__init__: it takes the span context, which is made lazily here.
        self.traceparent = traceparent
        self._remote = remote
        self._made: trace.SpanContext | None = None

    def get_span_context(self) -> trace.SpanContext:
        if self._made is None:
            tp = self.traceparent
            self._made = trace.SpanContext(trace_id=int(tp[3:35], 16), span_id=int(tp[36:52], 16),
                                           is_remote=self._remote, trace_flags=trace.TraceFlags(int(tp[53:55], 16)))
        return self._made

    def __repr__(self) -> str:
        return f"_Parent({self.traceparent!r})"


def _parent(trace_id: str, span_id: str, flags: str, *, remote: bool = True,
            base: context.Context | None = None) -> context.Context:
    """`base` (default: an empty context, as the W3C propagator extracts into) with a non-recording parent."""
    return trace.set_span_in_context(_Parent(f"00-{trace_id}-{span_id}-{flags}", remote=remote),
                                     context.Context() if base is None else base)


def _random_id(digits: int) -> str:
    """A random trace or span id in hex; never all zeros, which would mean none."""
    found = os.urandom(digits // 2).hex()
    return found if found.strip("0") else "1".zfill(digits)


def inject_headers(headers: dict[str, str]) -> dict[str, str]:
    """Add the current span's traceparent (no-op outside a span)."""
    if not _w3c_only():
        propagate.inject(headers)
        return headers
    current = context.get_current()
    span = trace.get_current_span(current)
    if baggage.get_all(current):
        propagate.inject(headers)
    elif isinstance(span, _Parent):
        headers[HDR_TRACEPARENT] = span.traceparent
    else:
        span_context = span.get_span_context()
        if span_context.trace_state:
            propagate.inject(headers)
        elif span_context != trace.INVALID_SPAN_CONTEXT:
            headers[HDR_TRACEPARENT] = (f"00-{span_context.trace_id:032x}-{span_context.span_id:016x}-"
                                      f"{span_context.trace_flags:02x}")
    return headers


def extract_context(headers: Mapping[str, str] | None) -> context.Context:
    if not headers:
        return context.Context()
    parent = headers.get(HDR_TRACEPARENT)
    plain = _TRACEPARENT.fullmatch(parent) if parent else None
    if (parent and plain is None) or "tracestate" in headers or "baggage" in headers or not _w3c_only():
        return propagate.extract(dict(headers))
    if plain is None or plain[1] == _NO_TRACE or plain[2] == _NO_SPAN:
        return context.Context()
    return _parent(plain[1], plain[2], plain[3])


def context_from_trace_id(trace_id: str) -> context.Context:
    """Continue a stored trace (the run record keeps its trace id) when no message carries it."""
    if not _TRACE_ID.fullmatch(trace_id) or trace_id == _NO_TRACE:
        return context.Context()
    return _parent(trace_id, _random_id(16), "01")


def _trace_hex(span: trace.Span) -> str:
    if isinstance(span, _Parent):  # always valid: made only from non-zero ids
        return span.traceparent[3:35]
    span_context = span.get_span_context()
    return f"{span_context.trace_id:032x}" if span_context.is_valid else ""


def trace_id_of(ctx: context.Context) -> str:
    return _trace_hex(trace.get_current_span(ctx))


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
    return _parent(_random_id(32), _random_id(16), "01", remote=False,
                   base=context.get_current() if base is None else base)


def current_trace_id() -> str:
    return _trace_hex(trace.get_current_span())


@contextmanager
def messaging_span(service_tracer: trace.Tracer, operation: str, destination: str, *,
                   parent: context.Context | None = None, kind: trace.SpanKind | None = None,
                   run_id: str = "", job: str = "", attempt: int | None = None,
                   links: Sequence[trace.Link] = ()) -> Iterator[trace.Span]:
    """A span named and described by the OpenTelemetry messaging conventions (`process jc.event.finished`),
    with run_id, job and trace_id bound into every log line written inside it."""
    if _dropping():
        # Nothing records spans in this process: skip making one (sampler, ids, attributes: a large share of an
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

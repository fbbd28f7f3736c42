"""jetcron's own handling of a plain traceparent gives exactly what OpenTelemetry's propagators give.

`tracing.extract_context` and `tracing.inject_headers` skip the propagators' generic path for the common
message (docs/benchmarks-history.md, "The changes that moved throughput and CPU"). Every case here is compared
with the propagators themselves, so the shortcut cannot drift from the W3C rules they implement.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import pytest
from hypothesis import given
from hypothesis import strategies as st
from opentelemetry import baggage, context, propagate, trace
from opentelemetry.context import Context
from opentelemetry.propagators import textmap

from jetcron.telemetry import tracing

TRACE = "0af7651916cd43dd8448eb211c80319c"
TRACE_B = "4bf92f3577b34da6a3ce929d0e0e4736"
SPAN = "b7ad6b7169203331"


def _seen(ctx: context.Context) -> tuple[int, int, bool, int, str] | None:
    """What a parent context tells a span started in it (None: no valid parent)."""
    span_context = trace.get_current_span(ctx).get_span_context()
    if not span_context.is_valid:
        return None
    return (span_context.trace_id, span_context.span_id, span_context.is_remote, span_context.trace_flags,
            span_context.trace_state.to_header())


def _injected(ctx: context.Context, inject: object) -> dict[str, str]:
    headers: dict[str, str] = {}
    token = context.attach(ctx)
    try:
        if inject is propagate.inject:
            propagate.inject(headers)
        else:
            tracing.inject_headers(headers)
    finally:
        context.detach(token)
    return headers


def _same_as_opentelemetry(headers: dict[str, str]) -> None:
    ours = tracing.extract_context(headers)
    theirs = propagate.extract(dict(headers))
    assert _seen(ours) == _seen(theirs)
    assert _injected(ours, tracing.inject_headers) == _injected(theirs, propagate.inject)
    assert tracing.trace_id_of(ours) == tracing.trace_id_of(theirs)
    assert baggage.get_all(ours) == baggage.get_all(theirs)


@given(trace_id=st.text("0123456789abcdef", min_size=32, max_size=32),
       span_id=st.text("0123456789abcdef", min_size=16, max_size=16),
       flags=st.sampled_from(["00", "01", "02", "ff"]))
def test_a_plain_traceparent_reads_and_writes_as_the_propagators_do(trace_id: str, span_id: str, flags: str) -> None:
    _same_as_opentelemetry({"traceparent": f"00-{trace_id}-{span_id}-{flags}", "Nats-Msg-Id": "r1"})


@pytest.mark.parametrize("traceparent", [
    pytest.param(f"00-{'0' * 32}-{SPAN}-01", id="zero_trace_id"),
    pytest.param(f"00-{TRACE}-{'0' * 16}-01", id="zero_span_id"),
    pytest.param(f"00-{TRACE.upper()}-{SPAN}-01", id="upper_case"),
    pytest.param(f"00-{TRACE}-{SPAN}-01-extra", id="version_00_with_more"),
    pytest.param(f"01-{TRACE}-{SPAN}-01-extra", id="later_version_with_more"),
    pytest.param(f"ff-{TRACE}-{SPAN}-01", id="version_ff"),
    pytest.param(f" 00-{TRACE}-{SPAN}-01\t", id="surrounding_blanks"),
    pytest.param(f"00-{TRACE[:-1]}-{SPAN}-01", id="short_trace_id"),
    pytest.param("", id="empty"),
    pytest.param("garbage", id="garbage"),
])
def test_every_other_form_reads_as_the_propagators_read_it(traceparent: str) -> None:
    _same_as_opentelemetry({"traceparent": traceparent})


@pytest.mark.parametrize("headers", [
    pytest.param({}, id="no_headers"),
    pytest.param({"Nats-Msg-Id": "r1"}, id="no_traceparent"),
    pytest.param({"traceparent": f"00-{TRACE}-{SPAN}-01", "tracestate": "vendor=1,other=two"}, id="tracestate"),
    pytest.param({"traceparent": f"00-{TRACE}-{SPAN}-01", "baggage": "tenant=acme,team=data"}, id="baggage"),
    pytest.param({"baggage": "tenant=acme"}, id="baggage_alone"),
])
def test_tracestate_and_baggage_travel_as_the_propagators_carry_them(headers: dict[str, str]) -> None:
    _same_as_opentelemetry(headers)


def test_a_carried_trace_is_passed_on_unchanged_and_its_span_context_made_on_demand() -> None:
    ctx = tracing.extract_context({"traceparent": f"00-{TRACE}-{SPAN}-01"})
    assert _injected(ctx, tracing.inject_headers) == {"traceparent": f"00-{TRACE}-{SPAN}-01"}
    assert _seen(ctx) == (int(TRACE, 16), int(SPAN, 16), True, 1, "")


def test_a_stored_trace_id_continues_that_trace_under_a_fresh_span_id() -> None:
    first, second = tracing.context_from_trace_id(TRACE), tracing.context_from_trace_id(TRACE)
    assert tracing.trace_id_of(first) == tracing.trace_id_of(second) == TRACE
    sent = _injected(first, tracing.inject_headers)["traceparent"].split("-")
    assert sent[0] == "00" and sent[1] == TRACE and sent[3] == "01" and int(sent[2], 16) != 0
    assert sent[2] != _injected(second, tracing.inject_headers)["traceparent"].split("-")[2]
    read_back = _seen(tracing.extract_context({"traceparent": "-".join(sent)}))
    assert read_back is not None and read_back[0] == int(TRACE, 16) and read_back[1:] == (int(sent[2], 16), True, 1, "")
    for stored in ("", "0" * 32, TRACE.upper(), TRACE[:-1]):
        assert _seen(tracing.context_from_trace_id(stored)) is None, stored


def test_a_recording_span_is_written_as_the_propagators_write_it() -> None:
    span_context = trace.SpanContext(trace_id=int(TRACE, 16), span_id=int(SPAN, 16), is_remote=False,
                                     trace_flags=trace.TraceFlags(1))
    ctx = trace.set_span_in_context(trace.NonRecordingSpan(span_context), context.Context())
    assert _injected(ctx, tracing.inject_headers) == _injected(ctx, propagate.inject) == {
        "traceparent": f"00-{TRACE}-{SPAN}-01"}
    assert _injected(context.Context(), tracing.inject_headers) == {}


class _Stamp(textmap.TextMapPropagator):
    """A propagator of another format (as OTEL_PROPAGATORS=b3 would install): the shortcut must step aside."""

    def extract(self, carrier: textmap.CarrierT, context: Context | None = None,
                getter: textmap.Getter[textmap.CarrierT] = textmap.default_getter) -> Context:
        found = getter.get(carrier, "x-stamp")
        base = context if context is not None else Context()
        if not found:
            return base
        parent = trace.SpanContext(trace_id=int(found[0], 16), span_id=1, is_remote=True)
        return trace.set_span_in_context(trace.NonRecordingSpan(parent), base)

    def inject(self, carrier: textmap.CarrierT, context: Context | None = None,
               setter: textmap.Setter[textmap.CarrierT] = textmap.default_setter) -> None:
        span_context = trace.get_current_span(context).get_span_context()
        if span_context.is_valid:
            setter.set(carrier, "x-stamp", f"{span_context.trace_id:032x}")

    @property
    def fields(self) -> set[str]:
        return {"x-stamp"}


@pytest.fixture
def other_propagator() -> Iterator[None]:
    before = propagate.get_global_textmap()
    propagate.set_global_textmap(_Stamp())
    try:
        yield
    finally:
        propagate.set_global_textmap(before)


def test_another_configured_propagator_is_used_as_configured(other_propagator: None) -> None:
    headers: Mapping[str, str] = {"x-stamp": TRACE, "traceparent": f"00-{TRACE_B}-{SPAN}-01"}
    ctx = tracing.extract_context(headers)
    assert tracing.trace_id_of(ctx) == TRACE
    assert _injected(ctx, tracing.inject_headers) == {"x-stamp": TRACE}


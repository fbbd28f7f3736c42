"""Structured logs: JSON lines to stdout, human format on a terminal."""

from __future__ import annotations

import logging
import sys
from contextvars import ContextVar, Token
from types import TracebackType

import structlog
from opentelemetry import trace

_LOG_FIELDS: ContextVar[tuple[tuple[str, str], ...]] = ContextVar("jetcron_log_fields", default=())
"""The run a line is written for (run_id, job): one variable set per span, not one per field. structlog's
bound_contextvars copies the whole context to save and restore each field, a twentieth of an agent's CPU
while a herd starts."""


class LogFields:
    """Every log line written inside names these fields (the empty ones are left out)."""

    __slots__ = ("_fields", "_token")

    def __init__(self, **fields: str) -> None:
        self._fields = tuple((k, v) for k, v in fields.items() if v)
        self._token: Token[tuple[tuple[str, str], ...]] | None = None

    def __enter__(self) -> None:
        outer = _LOG_FIELDS.get()
        # Inside another span's fields: keep those this one does not name (rare; most spans are not nested).
        fields = tuple({**dict(outer), **dict(self._fields)}.items()) if outer else self._fields
        self._token = _LOG_FIELDS.set(fields)

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if self._token is not None:
            _LOG_FIELDS.reset(self._token)


def _add_log_fields(_logger: object, _method: str, event: structlog.types.EventDict) -> structlog.types.EventDict:
    for key, value in _LOG_FIELDS.get():
        event.setdefault(key, value)
    return event


def _add_trace_id(_logger: object, _method: str, event: structlog.types.EventDict) -> structlog.types.EventDict:
    """trace_id of the current span, when there is one and the line does not already carry it."""
    if "trace_id" not in event:
        span_context = trace.get_current_span().get_span_context()
        if span_context.is_valid:
            event["trace_id"] = f"{span_context.trace_id:032x}"
    return event


def setup_logging(service: str, *, level: int = logging.INFO) -> None:
    processors: list[structlog.types.Processor] = [
        structlog.contextvars.merge_contextvars,
        _add_log_fields,
        _add_trace_id,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    renderer: structlog.types.Processor
    if sys.stdout.isatty():
        renderer = structlog.dev.ConsoleRenderer()
    else:
        processors.append(structlog.processors.format_exc_info)
        renderer = structlog.processors.JSONRenderer()
    structlog.configure(
        processors=[*processors, renderer],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stdout),
        cache_logger_on_first_use=True,
    )
    structlog.contextvars.bind_contextvars(service=service)

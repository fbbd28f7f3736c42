"""The API's reply envelope and the shapes its clients read back."""

from __future__ import annotations

from typing import Any, Generic, TypeVar

import msgspec

from jetcron.core.errors import Internal, JetcronError
from jetcron.core.models import JobRecord

T = TypeVar("T")


class ErrorBody(msgspec.Struct, frozen=True, kw_only=True):
    code: str
    message: str
    field: str | None = None
    value: str | None = None
    retryable: bool = False
    retry_after: float | None = None
    """Seconds to wait before retrying (rate_limited)."""


class Reply(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    ok: bool
    result: Any = None
    error: ErrorBody | None = None


def _text(value: object, limit: int = 2000) -> str:
    """Always encodable: a lone surrogate from the request is escaped, not allowed to break the reply."""
    return str(value)[:limit].encode("utf-8", "backslashreplace").decode("utf-8")


def error_reply(exc: Exception) -> Reply:
    """The one mapping of errors to API replies: what the error's class in jetcron.core.errors carries (an exception
    outside the hierarchy is a bug of ours: Internal, naming its type)."""
    error = exc if isinstance(exc, JetcronError) else Internal(f"{type(exc).__name__}: {exc}")
    named = error.field is not None
    return Reply(ok=False, error=ErrorBody(code=error.code, message=_text(error),
                                           field=_text(error.field) if named else None,
                                           value=_text(error.value, 200) if named else None,
                                           retryable=error.retryable, retry_after=error.retry_after))


PLAIN_FAILURE = b'{"ok":false,"error":{"code":"internal","message":"the reply could not be encoded","retryable":false}}'
"""Sent when even an error reply cannot be encoded: a caller gets an answer, never a timeout."""


class Page(msgspec.Struct, Generic[T], frozen=True, kw_only=True):
    items: list[T]
    next_cursor: str | None = None
    """Pass it back as `cursor` for the next page; None: this was the last."""


class ClusterStatus(msgspec.Struct, frozen=True, kw_only=True):
    """Who leads and who holds which trigger shard, and what waits for placement (cluster.status, admin)."""

    placement_leader: str | None
    tracker_leader: str | None
    shard_holders: dict[str, str]
    """Trigger shard number -> the replica holding it (a shard missing here is unheld)."""
    trigger_shards: int | None = None
    """How many shards the cluster was created with (None: no trigger replica has started yet)."""
    queue_depth: dict[str, int]
    """Runs waiting for placement, by priority."""
    agents: int | None = None
    """Agents registered (keys of the agents bucket: one listing, no record read); None from an api that predates
    it."""


class FireTime(msgspec.Struct, frozen=True, kw_only=True):
    local: str
    utc: str
    skipped: str | None = None
    """Why this occurrence is recorded skipped (a DST gap, `calendar NAME`), or None: it runs."""
    until: str | None = None
    """For a calendar's skip: every occurrence up to this instant is skipped too (shown once), or `never` when no
    later one runs either; None: this occurrence alone."""


class CalendarPreview(msgspec.Struct, frozen=True, kw_only=True):
    """A job's next fire times as they would be under an edited calendar (calendars.preview): nothing stored."""

    job: str
    calendar: str
    next_fires: list[FireTime] = msgspec.field(default_factory=list)


class JobView(msgspec.Struct, frozen=True, kw_only=True):
    job: JobRecord
    next_fires: list[FireTime] = msgspec.field(default_factory=list)
    wait_timeout_seconds: float | None = None
    """How long a run of the job may wait on its upstreams: its own `wait_timeout_seconds`, else the default
    (jetcron.core.lifecycle.dag.DEFAULT_WAIT_SECONDS, docs/architecture.md "Flows"); None for a job without
    upstreams."""

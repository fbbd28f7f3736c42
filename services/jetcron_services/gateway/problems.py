"""Errors as RFC 9457 problem details: the API's error codes as the HTTP statuses their users expect. Pure."""

from __future__ import annotations

import math
from typing import Any

import msgspec

from jetcron.core.errors import by_code

PROBLEM_JSON = "application/problem+json"

TITLES = {400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found", 405: "Method Not Allowed",
          409: "Conflict", 413: "Content Too Large", 422: "Unprocessable Content", 429: "Too Many Requests",
          500: "Internal Server Error", 503: "Service Unavailable"}
RETRY_AFTER_SECONDS = 1


class Problem(msgspec.Struct, kw_only=True, omit_defaults=True):
    """`type` is about:blank (the status says it all); `code` is the API's error code, `field` and `value`
    name what failed."""

    type: str = "about:blank"
    title: str
    status: int
    detail: str
    code: str | None = None
    field: str | None = None
    value: str | None = None


def problem(status: int, detail: str, *, code: str | None = None, field: str | None = None,
            value: str | None = None) -> Problem:
    return Problem(title=TITLES.get(status, "Error"), status=status, detail=detail, code=code, field=field,
                   value=value)


def status_of(code: str, retryable: bool) -> int:
    """The one mapping of the API's error codes to HTTP statuses: the status the code's class in jetcron.core.errors
    carries (a subclass its parent's: write_conflict is a Conflict, 409), else 503 where retrying helps and 500 where
    not."""
    return by_code(code).http_status or (503 if retryable else 500)


def headers_for(status: int, retryable: bool, after: float | None = None) -> dict[str, Any]:
    """Retry-After where waiting helps: a store or service that is busy or away, a tenant over its rate (whole
    seconds, rounded up: what HTTP allows)."""
    if after is not None:
        return {"Retry-After": str(max(1, math.ceil(after)))}
    return {"Retry-After": str(RETRY_AFTER_SECONDS)} if status in (429, 503) or retryable else {}

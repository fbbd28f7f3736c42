"""The API's errors as exceptions, one class per error code: `except NotFoundError` reads as what it means."""

from __future__ import annotations

from jetcron.core.errors import JetcronError
from jetcron.wire.api import ErrorBody


class ApiError(JetcronError):
    """An error the API answered with; `code` is invalid, not_found, conflict, unavailable, ..."""

    def __init__(self, body: ErrorBody) -> None:
        self.code = body.code
        self.field = body.field
        self.value = body.value
        self.retryable = body.retryable
        self.retry_after = body.retry_after
        super().__init__(body.message)


class InvalidError(ApiError):
    """A field failed validation (`field` and `value` name it); nothing was stored."""


class NotFoundError(ApiError):
    """No such job, run or secret (or another tenant's, which reads the same)."""


class ConflictError(ApiError):
    """It exists already, changed since it was read, or an idempotency key was reused with another body."""


class ForbiddenError(ApiError):
    """The credential may not do this (an admin verb, or a subject the server refused)."""


class UnauthorizedError(ApiError):
    """No valid credential."""


class UnavailableError(ApiError):
    """The API or its store is away or busy: retry."""


class RateLimitedError(ApiError):
    """Over the tenant's submit rate or pending-runs cap: retry after `retry_after` seconds."""


class IllegalTransitionError(ApiError):
    """The run cannot move that way from its state."""


class InternalError(ApiError):
    """A bug on the server's side; retrying may help."""


_BY_CODE: dict[str, type[ApiError]] = {
    "invalid": InvalidError, "not_found": NotFoundError, "conflict": ConflictError, "write_conflict": ConflictError,
    "forbidden": ForbiddenError, "unauthorized": UnauthorizedError, "unavailable": UnavailableError,
    "idempotency_full": UnavailableError, "storage_full": UnavailableError,
    "illegal_transition": IllegalTransitionError, "stale": IllegalTransitionError, "internal": InternalError,
    "rate_limited": RateLimitedError,
}


def api_error(body: ErrorBody) -> ApiError:
    """The exception for an error the API answered with (ApiError itself for a code this client does not know)."""
    return _BY_CODE.get(body.code, ApiError)(body)

"""The API's errors as exceptions: each reply code raised as the SDK class of the core class it stands for
(jetcron.core.errors.CODES), so `except NotFoundError` and `except NotFound` both read as what they mean."""

from __future__ import annotations

from jetcron.core.errors import (
    CODES,
    Conflict,
    Forbidden,
    IllegalTransition,
    Internal,
    InvalidSpec,
    JetcronError,
    NotFound,
    RateLimited,
    Unauthorized,
    Unavailable,
)
from jetcron.wire.api import ErrorBody


class ApiError(JetcronError):
    """An error the API answered with; `code` is invalid, not_found, conflict, unavailable, ... It carries what the
    reply says (`code`, the message, `field`, `value`, `retryable`, `retry_after`); what a core class knows beyond
    that where it is raised (a NotFound's kind and name) does not cross the wire and is not set here."""

    value: str | None

    def __init__(self, body: ErrorBody) -> None:
        # The API's message as it is: the core class's own constructor would compose one from parts the reply lacks.
        Exception.__init__(self, body.message)
        self.code = body.code
        self.field = body.field
        self.value = body.value
        self.retryable = body.retryable
        self.retry_after = body.retry_after


class InvalidError(ApiError, InvalidSpec):
    """A field failed validation (`field` and `value` name it); nothing was stored."""


class NotFoundError(ApiError, NotFound):
    """No such job, run or secret (or another tenant's, which reads the same)."""


class ConflictError(ApiError, Conflict):
    """It exists already, changed since it was read, or an idempotency key was reused with another body."""


class ForbiddenError(ApiError, Forbidden):
    """The credential may not do this (an admin verb, or a subject the server refused)."""


class UnauthorizedError(ApiError, Unauthorized):
    """No valid credential."""


class UnavailableError(ApiError, Unavailable):
    """The API or its store is away or busy: retry."""


class RateLimitedError(ApiError, RateLimited):
    """Over the tenant's submit rate or pending-runs cap: retry after `retry_after` seconds."""


class IllegalTransitionError(ApiError, IllegalTransition):
    """The run cannot move that way from its state."""


class InternalError(ApiError, Internal):
    """A bug on the server's side; retrying may help."""


_MADE_FOR: dict[type[JetcronError], type[ApiError]] = {cls.__bases__[1]: cls for cls in ApiError.__subclasses__()}
"""Core class -> the SDK class above, which extends it."""


def _for(core: type[JetcronError]) -> type[ApiError]:
    """The SDK class made for this core class or for its nearest parent that has one (write_conflict: a Conflict)."""
    return next((_MADE_FOR[c] for c in core.__mro__ if c in _MADE_FOR), ApiError)


_BY_CODE: dict[str, type[ApiError]] = {code: _for(core) for code, core in CODES.items()}


def api_error(body: ErrorBody) -> ApiError:
    """The exception for an error the API answered with (ApiError itself for a code this client does not know)."""
    return _BY_CODE.get(body.code, ApiError)(body)

"""The server's error codes, and nats-py's errors translated once into jetcron errors."""

from __future__ import annotations

import asyncio

import nats.errors
import nats.js.errors as jse

from jetcron.core.errors import NotFound, StorageFull, Unavailable, WriteConflict

WRONG_LAST = (10071, 10164)
"""The server's codes for a write whose expected last sequence did not match: someone wrote first."""
NO_MESSAGE = 10037
"""The server's code for a message get that matched nothing (a missing stream is another not-found: 10059)."""
# 10077: message size; 10047/10048: storage or bytes limit; 10023: the server's JetStream store (max_file_store)
# is full; 10026/10027: a consumer or stream count limit; 10008/10163: cluster not ready: retryable.
_FULL = {10023, 10047, 10048, 10026, 10027}


def translate(exc: BaseException, what: str) -> Exception:
    """Map a nats-py error to a jetcron error that says what happened and whether to retry."""
    if isinstance(exc, jse.KeyWrongLastSequenceError):
        return WriteConflict(f"{what}: written by someone else first")
    if isinstance(exc, jse.KeyNotFoundError):  # an APIError that nats-py makes without an err_code
        return NotFound("key", what)
    if isinstance(exc, jse.ServiceUnavailableError) and exc.err_code is None:
        return Unavailable(f"{what}: no server answered (503: a stream or consumer with no leader yet); retry later")
    if isinstance(exc, jse.APIError):
        code, description = getattr(exc, "err_code", None), getattr(exc, "description", None)
        if code in WRONG_LAST:
            return WriteConflict(f"{what}: written by someone else first")
        if code in _FULL or (description and "maximum" in description.lower()):
            return StorageFull(f"{what}: storage full ({description}). The run tracker lets the oldest finished "
                               "runs go near a limit; if this lasts, raise the limit (JETCRON_*_MAX_BYTES, or the "
                               "server's max_file_store) or shorten JETCRON_HISTORY_KEEP_SECONDS "
                               "(docs/operations.md, \"Storage pressure\"); retry later")
        return Unavailable(f"{what}: server error {code} {description}; retry later")
    if isinstance(exc, (asyncio.TimeoutError, nats.errors.TimeoutError, nats.errors.NoRespondersError,
                        nats.errors.ConnectionClosedError, jse.NoStreamResponseError)):
        return Unavailable(f"{what}: storage did not answer ({type(exc).__name__}); outcome unknown, retry")
    return Unavailable(f"{what}: {type(exc).__name__}: {exc}")

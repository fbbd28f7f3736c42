"""The one error hierarchy: every jetcron error names the thing it is about.

Every exception class jetcron defines is one of these or a subclass of one, documented where it lives (a transport
detail in bus, the SDK's classes for the API's replies, a page's refusal in the gateway):
`tests/unit/test_error_hierarchy.py` fails on one that is not. A class here carries what every door says of it:
`code`, the API reply's error code (`CODES` finds the class again from it); `retryable`, whether sending the same
request again can help; `http_status`, the REST API's status for it (services/jetcron_services/gateway/problems.py). The
API's reply (jetcron.wire.api.error_reply) and the HTTP problem are made from these, never from a table of their own.
"""

from __future__ import annotations

from datetime import datetime


class JetcronError(Exception):
    """Root of every error jetcron raises on purpose."""

    code = "error"
    retryable = False
    http_status: int | None = None
    """None: 503 where retrying helps, else 500 (problems.status_of)."""
    field: str | None = None
    """The request's field the error is about, where it names one (an API reply's `field`)."""
    value: object = None
    """The value that field held (shown in the reply only beside a field)."""
    retry_after: float | None = None
    """Seconds to wait before sending it again, where the error knows them."""


class InvalidSpec(JetcronError, ValueError):
    """A user-controlled field failed validation; nothing was stored."""

    code = "invalid"
    http_status = 422
    field: str

    def __init__(self, field: str, value: object, problem: str) -> None:
        self.field = field
        self.value = value
        self.problem = problem
        # An instant reads as the user wrote it, not as datetime.datetime(9999, 12, 31, ..., tzinfo=...).
        shown = repr(value.isoformat()) if isinstance(value, datetime) else repr(value)
        if len(shown) > 120:
            shown = shown[:117] + "..."
        super().__init__(f"{field}: {problem} (got {shown})")


class NotFound(JetcronError, LookupError):
    """A job, run or agent does not exist."""

    code = "not_found"
    http_status = 404

    def __init__(self, kind: str, name: str) -> None:
        self.kind = kind
        self.name = name
        super().__init__(f"{kind} {name!r} not found")


class Conflict(JetcronError):
    """The request clashes with stored state (name taken, idempotency key reused, wrong state)."""

    code = "conflict"
    http_status = 409


class Contended(Conflict):
    """A concurrent writer won this round (a claimed idempotency key, a record CAS lost too often).

    Nothing was stored, and the same request is expected to succeed when sent again: retryable, unlike
    a name already taken or a key reused with another body.
    """

    retryable = True


class IllegalTransition(JetcronError):
    """The run state machine refused an event in the run's current state."""

    code = "illegal_transition"
    http_status = 409

    def __init__(self, run_id: str, from_state: str, to_state: str, why: str = "") -> None:
        self.run_id = run_id
        self.from_state = from_state
        self.to_state = to_state
        detail = f": {why}" if why else ""
        super().__init__(f"run {run_id}: illegal transition {from_state} -> {to_state}{detail}")


class StaleReport(IllegalTransition):
    """A report carries an older attempt or fencing token than the run record."""

    code = "stale"


class Unavailable(JetcronError):
    """Storage or a dependency is unavailable or full; safe to retry, nothing was stored."""

    code = "unavailable"
    retryable = True
    http_status = 503


class UnsafeServer(JetcronError):
    """The NATS server does not meet jetcron's durability requirements."""

    code = "unsafe_server"


class Misconfigured(JetcronError):
    """This process's settings contradict what the cluster was created with: it refuses to start."""

    code = "misconfigured"


class StorageFull(Unavailable):
    """A stream, a bucket or the server's JetStream store is full: nothing was stored; retry once history is let go
    or the limit raised (docs/operations.md, "Storage pressure")."""

    code = "storage_full"


class IdempotencyStoreFull(Unavailable):
    """The idempotency bucket refused a new key; fail closed rather than forget old keys."""

    code = "idempotency_full"


class WriteConflict(Conflict):
    """A revision-checked write lost: someone else wrote first (or the key already exists)."""

    code = "write_conflict"


class LeaseLost(JetcronError):
    """A lease renewal failed: it expired or another holder took it; stop acting on it."""

    code = "lease_lost"


class RateLimited(JetcronError):
    """Refused to protect the system or other tenants: a submit rate or a pending-runs cap; retry after a while."""

    code = "rate_limited"
    retryable = True
    http_status = 429
    retry_after: float

    def __init__(self, message: str, *, retry_after: float) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class Forbidden(JetcronError, PermissionError):
    """The caller's credential does not allow this verb (an admin verb asked for by a tenant)."""

    code = "forbidden"
    http_status = 403


class Unauthorized(JetcronError, PermissionError):
    """No valid credential: the server refused the connection or a subject (named in the message)."""

    code = "unauthorized"
    http_status = 401


class Untrusted(JetcronError):
    """The server's TLS certificate could not be verified (no CA given, or another CA signed it)."""

    code = "untrusted"


class Internal(JetcronError):
    """A bug on the server's side: an exception that is none of these, answered as `internal` (its type and
    message in the reply's text); retrying may help."""

    code = "internal"
    retryable = True


CODES: dict[str, type[JetcronError]] = {
    c.code: c for c in list(globals().values()) if isinstance(c, type) and issubclass(c, JetcronError)
    and "code" in vars(c)}
"""Error code -> the class here that declares it (each declares its own: a unit test checks); a subclass elsewhere
keeps its parent's code."""


def by_code(code: str) -> type[JetcronError]:
    """The class an API reply's error code stands for: JetcronError itself for a code no class here declares."""
    return CODES.get(code, JetcronError)

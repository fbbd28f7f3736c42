"""What one row of the contract says of an operation, and the schemas, headers and parameters rows share."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from jetcron.core.ids import IDEMPOTENCY_KEY_RE, JOB_KEY_RE, RUN_ID_RE
from jetcron_services.gateway.gate import IF_MATCH_RE

JSON = "application/json"
MERGE_PATCH = "application/merge-patch+json"
TEXT = "text/plain"

NO_NUL = r"^[^\x00]*$"
JOB_ID = {"type": "string", "pattern": JOB_KEY_RE.pattern,
          "description": "The job's name (a tenant's token), or its key `tenant.name` (the admin's)."}
RUN_ID = {"type": "string", "pattern": RUN_ID_RE.pattern, "description": "A run's id: `<job key>.<stamp>`."}
CURSOR = {"type": "string", "maxLength": 256, "pattern": NO_NUL,
          "description": "The `next_cursor` of the page before."}


@dataclass(frozen=True)
class MergePatch:
    """A body that is a JSON merge patch (RFC 7396) of an `of` record: its schema is `of`'s with every property
    optional and nullable but those `of` must have (null removes one), its objects patched alike all the way down
    (`<Name>Patch`; what cannot change is readOnly there, by CONSTRAINTS)."""

    of: Any


@dataclass(frozen=True)
class Param:
    name: str
    where: str
    """path, query or header"""
    schema: dict[str, Any]
    description: str = ""
    required: bool = False


@dataclass(frozen=True)
class Op:
    method: str
    path: str
    operation_id: str
    summary: str
    reply: Any
    """The success body's type; TEXT for plain text."""
    status: int = 200
    description: str = ""
    params: tuple[Param, ...] = ()
    body: Any = None
    body_media: tuple[str, ...] = (JSON,)
    example: dict[str, Any] | None = None
    problems: tuple[int, ...] = ()
    """Statuses besides 401 and 503, which every route may answer."""
    reply_headers: tuple[str, ...] = ()
    links: dict[str, tuple[str, dict[str, str]]] = field(default_factory=dict)
    """name -> (operation id, its parameters from this reply: `$response.body#/job_id`)."""
    admin: bool = False
    verb: str | None = None
    """The API verb (jetcron.wire.verbs) this operation offers, whatever it reads besides (None: the gateway's own
    work). tests/unit/test_verb_doors.py checks that the route calls it, and that every verb has an operation or a
    reason for having none."""


HEADERS: dict[str, dict[str, Any]] = {
    "ETag": {"description": "The job's (or calendar's) version, quoted: send it back as `If-Match`.",
             "schema": {"type": "string", "pattern": r'^"[0-9]+"$'}, "required": True},
    "Location": {"description": "Where the new resource is read.", "schema": {"type": "string"}, "required": True},
    "Retry-After": {"description": "Seconds to wait before trying again.", "schema": {"type": "string"}},
    "WWW-Authenticate": {"description": "`Bearer realm=\"jetcron\"`.", "schema": {"type": "string"},
                         "required": True},
}
IDEMPOTENCY_KEY = Param("Idempotency-Key", "header", {"type": "string", "pattern": IDEMPOTENCY_KEY_RE.pattern},
                        "A retried request with the same key answers what the first did, and does nothing more.")
IF_MATCH = Param("If-Match", "header", {"type": "string", "pattern": IF_MATCH_RE.pattern},
                 "The version the change was made on (the ETag of `GET .../spec`): a job changed since is 409. "
                 "Without it: 428.", required=True)

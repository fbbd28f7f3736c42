"""The REST API's contract: one row per operation (its parameters with their real constraints, its body, every
status it answers with the RFC 9457 problem schema, the headers it reads and writes, the links that chain it to
the next call), from which the OpenAPI 3.1 document is made. Schemas are msgspec's own, so a reply is exactly
what its schema says; a test checks that every route the app serves has its row, and the reverse.

Rules JSON Schema cannot state are named in `SEMANTIC`: a request that passes the schema and breaks one of them is
answered 422 naming the field (docs/rest-api.md, "The contract")."""

from __future__ import annotations

from jetcron_services.gateway.contract._document import document, path_rules
from jetcron_services.gateway.contract._operations import CALENDAR_EXAMPLE, DESIGN_EXAMPLE, OPS
from jetcron_services.gateway.contract._reference import END, START, reference, write_reference
from jetcron_services.gateway.contract._rows import (
    CURSOR,
    HEADERS,
    IDEMPOTENCY_KEY,
    IF_MATCH,
    JOB_ID,
    JSON,
    MERGE_PATCH,
    NO_NUL,
    RUN_ID,
    TEXT,
    MergePatch,
    Op,
    Param,
)
from jetcron_services.gateway.contract._rules import BILLION, CONSTRAINTS, MONTH, SEMANTIC, SEMANTIC_FIELDS

__all__ = [
    "BILLION", "CALENDAR_EXAMPLE", "CONSTRAINTS", "CURSOR", "DESIGN_EXAMPLE", "END", "HEADERS", "IDEMPOTENCY_KEY",
    "IF_MATCH", "JOB_ID", "JSON", "MERGE_PATCH", "MONTH", "NO_NUL", "OPS", "RUN_ID", "SEMANTIC", "SEMANTIC_FIELDS",
    "START", "TEXT", "MergePatch", "Op", "Param", "document", "path_rules", "reference", "write_reference",
]

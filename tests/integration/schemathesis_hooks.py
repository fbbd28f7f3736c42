"""Hooks for schemathesis in the REST contract test (SCHEMATHESIS_HOOKS=schemathesis_hooks).

A 422 to a request the schema allows is the contract's only where a rule the schema cannot state was broken
(contract.SEMANTIC): the check below holds it to the fields those rules are about (contract.SEMANTIC_FIELDS), so a
422 for what the schema could have said (a field the schema lets through, a property it does not forbid) fails.

A valid `Idempotency-Key` the generator draws becomes a fresh one. The API answers a create retried with the same
key and body with the reply it stored, as the IETF draft and Stripe do, even when the job was deleted since; the
generator draws the same few boundary keys again and again ("0", "00"), so its stateful phase would create,
delete, "create" again by replay and then miss the job it was told of (ST302). The replay itself is tested
where it is meant (tests/integration/test_rest_api.py). A key outside the contract's pattern is left as
drawn: its 422 is part of the contract."""

from __future__ import annotations

import uuid
from typing import Any

import schemathesis

from jetcron.core.ids import IDEMPOTENCY_KEY_RE
from jetcron_services.gateway.contract import SEMANTIC_FIELDS


@schemathesis.hook
def map_headers(ctx: Any, headers: dict[str, Any] | None) -> dict[str, Any] | None:
    key = (headers or {}).get("Idempotency-Key")
    if headers is not None and isinstance(key, str) and IDEMPOTENCY_KEY_RE.fullmatch(key):
        headers["Idempotency-Key"] = uuid.uuid4().hex
    return headers


@schemathesis.check
def a_422_to_a_valid_request_names_a_rule_beyond_the_schema(ctx: Any, response: Any, case: Any) -> None:
    meta = case.meta
    if response.status_code != 422 or meta is None or not meta.generation.mode.is_positive:
        return
    operation = case.operation.definition.raw.get("operationId")
    field = str(response.json().get("field") or "")
    about = SEMANTIC_FIELDS.get(operation, ())
    if not any(field == name or field.startswith((f"{name}.", f"{name}[")) for name in about):
        raise AssertionError(f"{operation}: a request its schema allows was refused 422 naming {field!r}, which "
                             f"no rule beyond the schema is about ({', '.join(about) or 'it has none'}): the "
                             f"schema must say it. {response.text[:400]}")

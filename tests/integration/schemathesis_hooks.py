"""Hooks for schemathesis in the REST contract test (SCHEMATHESIS_HOOKS=schemathesis_hooks).

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


@schemathesis.hook
def map_headers(ctx: Any, headers: dict[str, Any] | None) -> dict[str, Any] | None:
    key = (headers or {}).get("Idempotency-Key")
    if headers is not None and isinstance(key, str) and IDEMPOTENCY_KEY_RE.fullmatch(key):
        headers["Idempotency-Key"] = uuid.uuid4().hex
    return headers

"""Reading request bodies strictly: known keys only, typed fields, errors that name the field."""

from __future__ import annotations

from datetime import datetime
from functools import cache
from typing import Any

import msgspec

from jetcron.core.errors import InvalidSpec
from jetcron.core.timing.schedule_text import check_instant
from jetcron.core.validate import parse_json_object


@cache
def _names(kind: type[msgspec.Struct]) -> tuple[frozenset[str], frozenset[str]]:
    """The field names `kind` allows and those it requires (msgspec.structs.fields resolves every annotation on
    each call: it was an eighth of the api's CPU per submit)."""
    fields = msgspec.structs.fields(kind)
    return frozenset(f.encode_name for f in fields), frozenset(f.encode_name for f in fields if f.required)


def body(data: bytes, kind: type[msgspec.Struct]) -> dict[str, Any]:
    """The request as a dict of the fields `kind` (jetcron.wire.verbs) names: an unknown one, or a missing required
    one, is named in the error. The verb checks each value itself."""
    allowed, required = _names(kind)
    parsed = parse_json_object(data or b"{}")
    for key in parsed:
        if key not in allowed:
            expected = f"expected one of {', '.join(sorted(allowed))}" if allowed else "this request takes none"
            # a field named "" is named as JSON spells it: an empty name would read as no name at all
            raise InvalidSpec(key or '""', parsed[key], f"unknown field ({expected})")
    for key in required:
        if key not in parsed:
            raise InvalidSpec(key, None, "is required")
    return parsed


def text(data: dict[str, Any], key: str, *, default: str | None = None, limit: int = 256) -> str | None:
    value = data.get(key, default)
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidSpec(key, value, "must be a string")
    if len(value) > limit or "\x00" in value:
        raise InvalidSpec(key, value, f"must be at most {limit} characters without NUL")
    return value


def integer(data: dict[str, Any], key: str, default: int, lo: int, hi: int) -> int:
    value = data.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise InvalidSpec(key, value, f"must be an integer from {lo} to {hi}")
    return value


def flag(data: dict[str, Any], key: str) -> bool:
    value = data.get(key, False)
    if not isinstance(value, bool):
        raise InvalidSpec(key, value, "must be true or false")
    return value


def instant(data: dict[str, Any], key: str) -> datetime:
    value = text(data, key)
    if value is None:
        raise InvalidSpec(key, None, "is required")
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise InvalidSpec(key, value, "is not an ISO 8601 instant") from None
    if parsed.tzinfo is None:
        raise InvalidSpec(key, value, "needs a UTC offset (e.g. 2026-01-01T00:00:00Z)")
    check_instant(parsed, key)
    return parsed

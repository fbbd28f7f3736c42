"""Parsing CLI values: durations (30s, 5m, 1h30m) and instants (now, +30s, ISO 8601)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from jetcron.core.errors import InvalidSpec
from jetcron.core.timing.schedule_text import check_instant

_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")
_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}


def duration(text: str, field: str = "duration") -> float:
    """'90' and '90s' are seconds; '1h30m', '500ms', '2d' also work."""
    cleaned = text.strip().lower()
    try:
        return float(cleaned)
    except ValueError:
        pass
    pos, total = 0, 0.0
    for match in _PART.finditer(cleaned):
        if match.start() != pos:
            break
        total += float(match.group(1)) * _UNITS[match.group(2)]
        pos = match.end()
    if pos != len(cleaned) or not cleaned:
        raise InvalidSpec(field, text, "is not a duration like 30s, 5m, 1h30m or 500ms")
    return total


def instant(text: str, now: datetime, field: str = "at") -> datetime:
    cleaned = text.strip()
    if cleaned == "now":
        return now
    if cleaned.startswith("+"):
        try:
            later = now + timedelta(seconds=duration(cleaned[1:], field))
        except OverflowError:
            raise InvalidSpec(field, text, "must lie between the years 2000 and 2200") from None
        check_instant(later, field)
        return later
    try:
        parsed = datetime.fromisoformat(cleaned.replace("Z", "+00:00"))
    except ValueError:
        raise InvalidSpec(field, text, "is not 'now', '+DURATION' or an ISO 8601 instant") from None
    if parsed.tzinfo is None:
        raise InvalidSpec(field, text, "needs a UTC offset, e.g. 2026-12-01T09:00:00Z")
    check_instant(parsed, field)
    return parsed.astimezone(UTC)


def split_names(texts: list[str]) -> list[str]:
    """`--exclude a,b --exclude c` as [a, b, c]; `--exclude ''` as [] (update: clears the list)."""
    return [name.strip() for text in texts for name in text.split(",") if name.strip()]

"""A schedule as a sentence: what the dashboard and the CLI both show (`every 5 minutes`, `At 02:30 AM (Europe/Berlin)
· 30 2 * * *`), so that one job reads the same wherever it is looked at."""

from __future__ import annotations

import functools

from jetcron.core.models import Schedule, ScheduleKind
from jetcron.core.timing.schedule_text import expand_alias

_UNITS = ((86400, "day"), (3600, "hour"), (60, "minute"), (1, "second"))


def interval_words(seconds: float) -> str:
    """`every 90 seconds`, `every 5 minutes`, `every hour`: the largest unit that divides the interval."""
    for size, unit in _UNITS:
        if seconds >= size and seconds % size == 0:
            n = int(seconds // size)
            return f"every {unit}" if n == 1 else f"every {n} {unit}s"
    return f"every {seconds:g} seconds"


@functools.lru_cache(maxsize=4096)
def schedule_words(schedule: Schedule) -> str:
    """The schedule as a sentence (cached: a jobs page asks for 50 at a time, most of them alike)."""
    if schedule.kind == ScheduleKind.NOW:
        return "once, when created"
    if schedule.kind == ScheduleKind.AT:
        return f"once at {schedule.at.isoformat() if schedule.at else '?'}"
    if schedule.kind == ScheduleKind.EVERY:
        return interval_words(schedule.every_seconds or 0)
    from cron_descriptor import get_description  # a twentieth of a second to import: only for cron schedules

    expr = schedule.cron or ""
    expanded = expand_alias(expr)
    try:
        words = get_description(expanded)
    except Exception:  # the library's own parse errors: the expression was validated by ours, so show it bare
        words = expr
    zone = "" if schedule.tz == "UTC" else f" ({schedule.tz})"
    return f"{words}{zone}" if words == expr else f"{words}{zone} · {expr}"

"""What a schedule's words mean without croniter: an @alias's fields, whether an instant a user gave is one
jetcron takes, a zone by its name. Apart from jetcron.core.timing.cron so that what only shows or checks them (the
SDK, `jetcron jobs list`) starts without importing croniter."""

from __future__ import annotations

import functools
from datetime import UTC, datetime
from importlib import resources
from zoneinfo import ZoneInfo

from jetcron.core.errors import InvalidSpec

CALENDAR = "calendar "
"""How the reason of an occurrence a calendar skips begins (`calendar <name>`)."""

ALIASES = {"@hourly": "0 * * * *", "@daily": "0 0 * * *", "@midnight": "0 0 * * *", "@weekly": "0 0 * * 0",
           "@monthly": "0 0 1 * *", "@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *"}


def expand_alias(expr: str) -> str:
    """`@daily` as the five fields it stands for; any other expression as given."""
    return ALIASES.get(expr.strip().lower(), expr)


def check_instant(value: datetime | None, field: str) -> None:
    """An instant a user gave: with a UTC offset, between the years 2000 and 2200 (InvalidSpec otherwise)."""
    if value is None or value.tzinfo is None or value.utcoffset() is None:
        raise InvalidSpec(field, value, "must be an ISO 8601 instant with a UTC offset")
    try:
        year = value.astimezone(UTC).year
    except OverflowError:  # 9999-12-31T23:59:59-01:00 and 0001-01-01T00:00:00+01:00 have no UTC datetime
        year = value.year
    if not 2000 <= year <= 2200:
        raise InvalidSpec(field, value, "must lie between the years 2000 and 2200")


# Zones come from the tzdata package pinned in pyproject.toml, never the host's /usr/share/zoneinfo (which
# ZoneInfo(name) prefers): every process of a cluster answers DST questions alike, and an OS update changes no
# schedule. Upgrading tzdata is a jetcron release (docs/decisions-trigger.md).
_known_zones = functools.cache(lambda: frozenset(
    resources.files("tzdata").joinpath("zones").read_text().split()))


@functools.cache
def _load(tz: str) -> ZoneInfo:
    with resources.files("tzdata").joinpath("zoneinfo", *tz.split("/")).open("rb") as data:
        return ZoneInfo.from_file(data, key=tz)


def zone(tz: str, field: str = "schedule.tz") -> ZoneInfo:
    """An IANA zone of the pinned tzdata; ZoneInfo alone would accept 'Factory' and 'localtime'."""
    if not isinstance(tz, str) or tz != tz.strip() or not tz or ".." in tz or tz.startswith("/"):
        raise InvalidSpec(field, tz, "not an IANA time zone name")
    if tz in ("Factory", "localtime") or tz not in _known_zones():
        raise InvalidSpec(field, tz, "unknown time zone (expected an IANA name such as 'Europe/Berlin')")
    return _load(tz)

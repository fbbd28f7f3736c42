"""The flags of `calendars create` and `calendars update`, applied to a calendar: what a flag names changes, the
rest stays. Pure but for nothing: the ICS file's text is read by the command and parsed here
(jetcron.core.timing.ics)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any

from jetcron.cli.parse import split_names
from jetcron.core.errors import InvalidSpec
from jetcron.core.timing.calendars import CalendarRule, parse_window

_RULES = ", ".join(r.value for r in CalendarRule)


@dataclass(frozen=True)
class CalendarFlags:
    """Every flag is None (or empty) when not given."""

    dates: list[str] = field(default_factory=list)
    """`--dates 2026-12-25,2027-01-01`, repeatable."""
    ics: str | None = None
    """The text of `--ics FILE`."""
    ics_name: str = "--ics"
    rules: list[str] = field(default_factory=list)
    windows: list[str] = field(default_factory=list)
    tz: str | None = None
    description: str | None = None
    tenant: str | None = None


def parse_dates(texts: list[str]) -> list[str]:
    found: dict[str, None] = {}
    for text in texts:
        for part in (p.strip() for p in text.split(",")):
            if not part:
                continue
            try:
                found[date.fromisoformat(part).isoformat()] = None
            except ValueError:
                raise InvalidSpec("--dates", part, "is not a date YYYY-MM-DD (several: 2026-12-25,2027-01-01)"
                                  ) from None
    return list(found)


def apply_calendar_flags(spec: dict[str, Any], flags: CalendarFlags, now: datetime) -> dict[str, Any]:
    """A copy of `spec` with every given flag applied (`calendars update` starts from the stored calendar).

    --dates, --rule and --window each replace that whole list; --ics FILE replaces the dates and windows with the
    file's events (and those --dates and --window give beside it); --tz, --description and --tenant set theirs.
    """
    out = dict(spec)
    from jetcron.core.timing.ics import parse_ics  # icalendar: imported only by the commands that read a file

    imported = parse_ics(flags.ics, now=now, field=flags.ics_name) if flags.ics is not None else None
    if flags.dates or imported is not None:
        days = {*parse_dates(flags.dates), *(d.isoformat() for d in (imported.dates if imported else []))}
        out["dates"] = sorted(days)
    if flags.windows or imported is not None:
        for text in flags.windows:
            parse_window(text, "--window")
        out["windows"] = list(dict.fromkeys([*flags.windows, *(imported.windows if imported else [])]))
    if flags.rules:
        rules = split_names(flags.rules)
        for rule in rules:
            if rule not in {r.value for r in CalendarRule}:
                raise InvalidSpec("--rule", rule, f"is not a rule ({_RULES})")
        out["rules"] = list(dict.fromkeys(rules))
    for key, value in (("tz", flags.tz), ("description", flags.description), ("tenant", flags.tenant)):
        if value is not None:
            out[key] = value
    return out


def new_calendar(name: str, flags: CalendarFlags, now: datetime) -> dict[str, Any]:
    """`calendars create`: a calendar in UTC unless --tz says otherwise."""
    return apply_calendar_flags({"name": name}, flags, now)

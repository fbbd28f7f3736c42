"""The flags of `jobs create` and `jobs update`, applied to a spec: what a flag names changes, the rest stays."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from jetcron.cli.parse import duration, instant, split_names
from jetcron.core.errors import InvalidSpec

# Each kind's own schedule fields: switching kinds drops the old kind's, keeps the zone and DST policies.
_KIND_FIELDS = ("at", "every_seconds", "anchor", "cron")


@dataclass(frozen=True)
class JobFlags:
    """Every flag is None (or empty) when not given."""

    at: str | None = None
    every: str | None = None
    cron: str | None = None
    tz: str | None = None
    on_gap: str | None = None
    on_fold: str | None = None
    cpu: float | None = None
    memory: int | None = None
    gpus: int | None = None
    max_attempts: int | None = None
    timeout: float | None = None
    backoff_initial: str | None = None
    backoff_max: str | None = None
    backoff_multiplier: float | None = None
    env: list[str] = field(default_factory=list)
    priority: str | None = None
    tenant: str | None = None
    queue: str | None = None
    depends_on: list[str] = field(default_factory=list)
    require: list[str] = field(default_factory=list)
    secrets: list[str] = field(default_factory=list)
    overlap: str | None = None
    misfire: str | None = None
    notify_on: str | None = None
    webhook: str | None = None
    webhook_secret: str | None = None
    notify_subject: str | None = None
    notify_email: str | None = None
    start_deadline: str | None = None
    finish_deadline: str | None = None
    keep: str | None = None
    keep_succeeded: int | None = None
    keep_failed: int | None = None
    exclude: list[str] = field(default_factory=list)
    """--exclude NAME[,NAME]: calendars whose days the job skips (update: replaces the list; '' clears it)."""
    only: list[str] = field(default_factory=list)
    """--only NAME[,NAME]: calendars the job keeps to (the same)."""


def new_spec(name: str, command: list[str], flags: JobFlags, now: datetime) -> dict[str, Any]:
    """`jobs create`: a job that runs now, in UTC, unless the flags say otherwise."""
    return apply_flags({"name": name, "command": command, "schedule": {"kind": "now", "tz": "UTC"}}, flags, now)


def apply_flags(spec: dict[str, Any], flags: JobFlags, now: datetime) -> dict[str, Any]:
    """A copy of `spec` with every given flag applied (`jobs update` starts from the stored spec).

    A new --at/--every/--cron replaces the schedule's kind (keeping --tz and the DST policies unless given);
    --env, --require and --depends-on replace the whole map or list; every other flag sets one field.
    """
    out = dict(spec)
    out["schedule"] = _schedule(dict(spec.get("schedule") or {"kind": "now", "tz": "UTC"}), flags, now)
    resources = {k: v for k, v in (("cpu", flags.cpu), ("memory_mb", flags.memory), ("gpus", flags.gpus))
                 if v is not None}
    if resources:
        out["resources"] = {**(spec.get("resources") or {}), **resources}
    retry = {
        k: v
        for k, v in (
            ("max_attempts", flags.max_attempts),
            ("initial_seconds",
             duration(flags.backoff_initial, "retry.initial_seconds") if flags.backoff_initial else None),
            ("max_delay_seconds",
             duration(flags.backoff_max, "retry.max_delay_seconds") if flags.backoff_max else None),
            ("multiplier", flags.backoff_multiplier),
        )
        if v is not None
    }
    if retry:
        out["retry"] = {**(spec.get("retry") or {}), **retry}
    if flags.timeout is not None:
        out["timeout_seconds"] = flags.timeout
    if flags.env:
        out["env"] = dict(_pair(e, "env") for e in flags.env)
    if flags.require:
        out["require"] = dict(_pair(r, "require") for r in flags.require)
    if flags.secrets:
        out["secrets"] = list(flags.secrets)
    for key, value in (("priority", flags.priority), ("tenant", flags.tenant), ("overlap", flags.overlap),
                       ("queue", flags.queue)):
        if value is not None:
            out[key] = value
    if flags.depends_on:
        out["depends_on"] = list(flags.depends_on)
    if flags.misfire:
        out["misfire"] = {**(spec.get("misfire") or {}), "kind": flags.misfire}
    for key, text in (("start_deadline_seconds", flags.start_deadline),
                      ("finish_deadline_seconds", flags.finish_deadline)):
        if text is not None:
            out[key] = duration(text, key)
    rule = _notify_rule(flags)
    if rule is not None:
        out["notify"] = [rule]
    for key, names in (("exclude_calendars", flags.exclude), ("only_calendars", flags.only)):
        if names:
            out[key] = split_names(names)
    history = history_flags(flags.keep, flags.keep_succeeded, flags.keep_failed)
    if history:
        out["history"] = {**(spec.get("history") or {}), **history}
    return out


def history_flags(keep: str | None, succeeded: int | None, failed: int | None) -> dict[str, Any]:
    """--keep, --keep-succeeded and --keep-failed as a HistoryPolicy's fields (those given)."""
    return {k: v for k, v in (("keep_seconds", duration(keep, "history.keep_seconds") if keep else None),
                              ("keep_succeeded", succeeded), ("keep_failed", failed)) if v is not None}


def _notify_rule(flags: JobFlags) -> dict[str, Any] | None:
    """--notify-on with one target makes the job's one rule (update: replaces every rule; -f for several)."""
    targets = {k: v for k, v in (("webhook", flags.webhook), ("subject", flags.notify_subject),
                                 ("email", flags.notify_email)) if v is not None}
    if flags.notify_on is None:
        if targets or flags.webhook_secret is not None:
            raise InvalidSpec("notify.on", None, "--notify-on EVENT[,EVENT] is needed with a notification target")
        return None
    if len(targets) != 1:
        raise InvalidSpec("notify", sorted(targets), "give exactly one of --webhook, --notify-subject and "
                                                     "--notify-email with --notify-on")
    events = [e.strip() for e in flags.notify_on.split(",") if e.strip()]
    rule: dict[str, Any] = {"on": events, **targets}
    if flags.webhook_secret is not None:
        rule["secret"] = flags.webhook_secret
    return rule


def _schedule(schedule: dict[str, Any], flags: JobFlags, now: datetime) -> dict[str, Any]:
    if sum(x is not None for x in (flags.at, flags.every, flags.cron)) > 1:
        raise InvalidSpec("schedule", "--at, --every, --cron", "give at most one of them")
    kind: dict[str, Any] | None = None
    if flags.at is not None:
        kind = {"kind": "now"} if flags.at.strip() == "now" else {
            "kind": "at", "at": instant(flags.at, now, "schedule.at").isoformat()}
    elif flags.every is not None:
        kind = {"kind": "every", "every_seconds": duration(flags.every, "schedule.every_seconds")}
        if schedule.get("kind") == "every" and schedule.get("anchor"):
            kind["anchor"] = schedule["anchor"]  # a new interval keeps the job's phase
    elif flags.cron is not None:
        kind = {"kind": "cron", "cron": flags.cron}
    if kind is not None:
        schedule = {k: v for k, v in schedule.items() if k not in _KIND_FIELDS} | kind
    for key, value in (("tz", flags.tz), ("on_gap", flags.on_gap), ("on_fold", flags.on_fold)):
        if value is not None:
            schedule[key] = value
    return {k: v for k, v in schedule.items() if v is not None}


def _pair(text: str, name: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep:
        raise InvalidSpec(name, text, "must be NAME=VALUE")
    return key, value

"""When a job fires: schedules and cron, calendars and exclusions, the trigger's plans, herds, pacing and its warm
index. Pure: no I/O.

Each module's public names are re-exported here, loaded on first use: importing one module of the group
loads that module alone."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from jetcron.core.timing.calendar_time import Compiled as Compiled
    from jetcron.core.timing.calendar_time import compile_calendar as compile_calendar
    from jetcron.core.timing.calendars import (
        MAX_DATES as MAX_DATES,
    )
    from jetcron.core.timing.calendars import (
        MAX_JOB_CALENDARS as MAX_JOB_CALENDARS,
    )
    from jetcron.core.timing.calendars import (
        MAX_WINDOWS as MAX_WINDOWS,
    )
    from jetcron.core.timing.calendars import (
        CalendarRecord as CalendarRecord,
    )
    from jetcron.core.timing.calendars import (
        CalendarRule as CalendarRule,
    )
    from jetcron.core.timing.calendars import (
        CalendarSpec as CalendarSpec,
    )
    from jetcron.core.timing.calendars import (
        Window as Window,
    )
    from jetcron.core.timing.calendars import (
        check_job_calendar_names as check_job_calendar_names,
    )
    from jetcron.core.timing.calendars import (
        parse_window as parse_window,
    )
    from jetcron.core.timing.calendars import (
        validate_calendar as validate_calendar,
    )
    from jetcron.core.timing.cron import (
        CronExpr as CronExpr,
    )
    from jetcron.core.timing.cron import (
        Occurrence as Occurrence,
    )
    from jetcron.core.timing.cron import (
        dst_note as dst_note,
    )
    from jetcron.core.timing.cron import (
        every_index as every_index,
    )
    from jetcron.core.timing.cron import (
        expand_alias as expand_alias,
    )
    from jetcron.core.timing.cron import (
        next_fires as next_fires,
    )
    from jetcron.core.timing.cron import (
        occurrences as occurrences,
    )
    from jetcron.core.timing.cron import (
        parse_cron as parse_cron,
    )
    from jetcron.core.timing.cron import (
        validate_schedule as validate_schedule,
    )
    from jetcron.core.timing.cron import (
        zone as zone,
    )
    from jetcron.core.timing.due_index import DueIndex as DueIndex
    from jetcron.core.timing.exclusions import (
        CALENDAR as CALENDAR,
    )
    from jetcron.core.timing.exclusions import (
        JobCalendars as JobCalendars,
    )
    from jetcron.core.timing.exclusions import (
        apply as apply,
    )
    from jetcron.core.timing.exclusions import (
        check_year as check_year,
    )
    from jetcron.core.timing.exclusions import (
        preview as preview,
    )
    from jetcron.core.timing.exclusions import (
        skip_kind as skip_kind,
    )
    from jetcron.core.timing.fire_marks import (
        MARK_PREFIX as MARK_PREFIX,
    )
    from jetcron.core.timing.fire_marks import (
        FireMarks as FireMarks,
    )
    from jetcron.core.timing.fire_marks import (
        covers as covers,
    )
    from jetcron.core.timing.fire_marks import (
        mark_key as mark_key,
    )
    from jetcron.core.timing.fire_marks import (
        mark_shard as mark_shard,
    )
    from jetcron.core.timing.herds import Herds as Herds
    from jetcron.core.timing.herds import extra_lead as extra_lead
    from jetcron.core.timing.ics import (
        AHEAD as AHEAD,
    )
    from jetcron.core.timing.ics import (
        BUDGET_S as BUDGET_S,
    )
    from jetcron.core.timing.ics import (
        MAX_ICS_BYTES as MAX_ICS_BYTES,
    )
    from jetcron.core.timing.ics import (
        MAX_OCCURRENCES as MAX_OCCURRENCES,
    )
    from jetcron.core.timing.ics import (
        MAX_RECURRENCES as MAX_RECURRENCES,
    )
    from jetcron.core.timing.ics import (
        MAX_ZONE_CHANGES as MAX_ZONE_CHANGES,
    )
    from jetcron.core.timing.ics import (
        PAST as PAST,
    )
    from jetcron.core.timing.ics import (
        IcsImport as IcsImport,
    )
    from jetcron.core.timing.ics import (
        parse_ics as parse_ics,
    )
    from jetcron.core.timing.pacing import (
        PAUSE_MAX as PAUSE_MAX,
    )
    from jetcron.core.timing.pacing import (
        SLOW_PASS as SLOW_PASS,
    )
    from jetcron.core.timing.pacing import (
        WALK_PAST_FULL as WALK_PAST_FULL,
    )
    from jetcron.core.timing.pacing import (
        TokenBucket as TokenBucket,
    )
    from jetcron.core.timing.pacing import (
        pause_after as pause_after,
    )
    from jetcron.core.timing.pacing import (
        walk_on_when_full as walk_on_when_full,
    )
    from jetcron.core.timing.schedule_words import interval_words as interval_words
    from jetcron.core.timing.triggers import (
        BackfillRun as BackfillRun,
    )
    from jetcron.core.timing.triggers import (
        FirePlan as FirePlan,
    )
    from jetcron.core.timing.triggers import (
        OverlapAction as OverlapAction,
    )
    from jetcron.core.timing.triggers import (
        PlannedFire as PlannedFire,
    )
    from jetcron.core.timing.triggers import (
        decide_overlap as decide_overlap,
    )
    from jetcron.core.timing.triggers import (
        jitter_offset as jitter_offset,
    )
    from jetcron.core.timing.triggers import (
        next_wake as next_wake,
    )
    from jetcron.core.timing.triggers import (
        pace_backfill as pace_backfill,
    )
    from jetcron.core.timing.triggers import (
        plan_backfill as plan_backfill,
    )
    from jetcron.core.timing.triggers import (
        plan_fires as plan_fires,
    )
    from jetcron.core.timing.triggers import (
        staging_horizon as staging_horizon,
    )

_HOME = {
    "AHEAD": "ics",
    "BUDGET_S": "ics",
    "BackfillRun": "triggers",
    "CALENDAR": "exclusions",
    "CalendarRecord": "calendars",
    "CalendarRule": "calendars",
    "CalendarSpec": "calendars",
    "Compiled": "calendar_time",
    "CronExpr": "cron",
    "DueIndex": "due_index",
    "FireMarks": "fire_marks",
    "FirePlan": "triggers",
    "Herds": "herds",
    "IcsImport": "ics",
    "JobCalendars": "exclusions",
    "MARK_PREFIX": "fire_marks",
    "MAX_DATES": "calendars",
    "MAX_ICS_BYTES": "ics",
    "MAX_JOB_CALENDARS": "calendars",
    "MAX_OCCURRENCES": "ics",
    "MAX_RECURRENCES": "ics",
    "MAX_WINDOWS": "calendars",
    "MAX_ZONE_CHANGES": "ics",
    "Occurrence": "cron",
    "OverlapAction": "triggers",
    "PAST": "ics",
    "PAUSE_MAX": "pacing",
    "PlannedFire": "triggers",
    "SLOW_PASS": "pacing",
    "TokenBucket": "pacing",
    "WALK_PAST_FULL": "pacing",
    "Window": "calendars",
    "apply": "exclusions",
    "check_job_calendar_names": "calendars",
    "check_year": "exclusions",
    "compile_calendar": "calendar_time",
    "covers": "fire_marks",
    "decide_overlap": "triggers",
    "dst_note": "cron",
    "every_index": "cron",
    "expand_alias": "cron",
    "extra_lead": "herds",
    "interval_words": "schedule_words",
    "jitter_offset": "triggers",
    "mark_key": "fire_marks",
    "mark_shard": "fire_marks",
    "next_fires": "cron",
    "next_wake": "triggers",
    "occurrences": "cron",
    "pace_backfill": "triggers",
    "parse_cron": "cron",
    "parse_ics": "ics",
    "parse_window": "calendars",
    "pause_after": "pacing",
    "plan_backfill": "triggers",
    "plan_fires": "triggers",
    "preview": "exclusions",
    "skip_kind": "exclusions",
    "staging_horizon": "triggers",
    "validate_calendar": "calendars",
    "validate_schedule": "cron",
    "walk_on_when_full": "pacing",
    "zone": "cron",
}
"""Where each re-exported name is defined, by module of jetcron.core.timing."""

__all__ = sorted(_HOME)


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{home}"), name)

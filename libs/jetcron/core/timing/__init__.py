"""When a job fires: schedules and cron, calendars and exclusions, the trigger's plans, herds, pacing and its warm
index. Pure: no I/O.

Each module's public names are re-exported here, loaded on first use: importing one module of the group
loads that module alone."""

from __future__ import annotations

from jetcron.core.lazy import exports

_HOME = {
    "AHEAD": "ics",
    "BUDGET_S": "ics",
    "BackfillRun": "triggers",
    "CALENDAR": "schedule_text",
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
    "check_instant": "schedule_text",
    "check_job_calendar_names": "calendars",
    "check_year": "exclusions",
    "compile_calendar": "calendar_time",
    "covers": "fire_marks",
    "decide_overlap": "triggers",
    "dst_note": "cron",
    "every_index": "cron",
    "expand_alias": "schedule_text",
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
    "zone": "schedule_text",
}
"""Where each re-exported name is defined, by module of jetcron.core.timing."""

__all__, __getattr__ = exports(__name__, _HOME)

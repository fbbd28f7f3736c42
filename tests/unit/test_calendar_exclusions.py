"""A job's calendars applied to its occurrences, as tables of pure decisions: the trigger's plans (skipped with the
calendar's name, never left out), the year check at submit, and the fire-time previews."""

from __future__ import annotations

import random
from datetime import UTC, date, datetime, timedelta

import msgspec
import pytest

from jetcron.core.errors import InvalidSpec
from jetcron.core.lifecycle.notify import missed_deadlines
from jetcron.core.models import JobSpec, MisfireKind, MisfirePolicy, Run, RunState, Schedule, ScheduleKind
from jetcron.core.timing import exclusions
from jetcron.core.timing.calendar_time import compile_calendar
from jetcron.core.timing.calendars import CalendarRule, CalendarSpec
from jetcron.core.timing.exclusions import JobCalendars, skip_kind
from jetcron.core.timing.triggers import plan_backfill, plan_fires


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


def compiled(name: str, *, tz: str = "UTC", dates: tuple[str, ...] = (), rules: tuple[str, ...] = (),
             windows: tuple[str, ...] = ()):  # type: ignore[no-untyped-def]
    return compile_calendar(CalendarSpec(name=name, tz=tz, dates=[date.fromisoformat(d) for d in dates],
                                         rules=[CalendarRule(r) for r in rules], windows=list(windows)))


def job(schedule: Schedule, **fields: object) -> JobSpec:
    return JobSpec(name="j", command=["true"], schedule=schedule, **fields)  # type: ignore[arg-type]


EVERY_SECOND = Schedule(kind=ScheduleKind.EVERY, every_seconds=1, anchor=utc("2026-01-01T00:00:00Z"))
NOW = utc("2026-12-04T12:00:00Z")  # a Friday
FREEZE = compiled("freeze", windows=("2026-12-04T12:00:03Z/2026-12-04T12:00:06Z",))
WEEKDAYS = compiled("business-days", rules=("weekdays",))


def test_an_excluded_occurrence_is_recorded_skipped_naming_the_calendar_and_the_rest_run() -> None:
    plan = plan_fires(job(EVERY_SECOND), created_at=NOW, cursor=NOW, now=NOW, horizon_seconds=8.0,
                      rng=random.Random(1), calendars=JobCalendars(exclude=(("freeze", FREEZE),)))
    assert [(f.nominal.second, f.skip_reason) for f in plan.fires] == [
        (1, None), (2, None), (3, "calendar freeze"), (4, "calendar freeze"), (5, "calendar freeze"), (6, None),
        (7, None), (8, None)]


def test_only_calendars_keep_a_job_inside_every_one_of_them() -> None:
    saturday = utc("2026-12-05T00:00:00Z")
    plan = plan_fires(job(EVERY_SECOND), created_at=saturday, cursor=saturday - timedelta(seconds=3),
                      now=saturday - timedelta(seconds=2), horizon_seconds=3.0, rng=random.Random(1),
                      calendars=JobCalendars(only=(("business-days", WEEKDAYS),)))
    reasons = [f.skip_reason for f in plan.fires]
    assert reasons == [None, None, "calendar business-days: outside it (only)", "calendar business-days: outside it "
                       "(only)"]


def test_a_calendar_gone_skips_saying_so() -> None:
    plan = plan_fires(job(EVERY_SECOND), created_at=NOW, cursor=NOW, now=NOW, horizon_seconds=1.0,
                      rng=random.Random(1), calendars=JobCalendars(exclude=(("gone", None),)))
    assert [f.skip_reason for f in plan.fires] == ["calendar gone: unknown (deleted after the job was stored)"]
    assert skip_kind(plan.fires[0].skip_reason) == "unknown"


def test_misfire_latest_runs_the_latest_missed_occurrence_the_calendar_allows() -> None:
    # Five minutes of a per-minute job missed; the calendar holds the last two: the one before them runs now.
    minutely = Schedule(kind=ScheduleKind.CRON, cron="* * * * *")
    hold = compiled("hold", windows=("2026-12-04T11:58:30Z/2026-12-04T12:00:30Z",))
    spec = job(minutely, misfire=MisfirePolicy(kind=MisfireKind.LATEST))
    plan = plan_fires(spec, created_at=utc("2026-12-01T00:00:00Z"), cursor=utc("2026-12-04T11:55:00Z"),
                      now=utc("2026-12-04T12:00:20Z"), horizon_seconds=0.0, rng=random.Random(1),
                      calendars=JobCalendars(exclude=(("hold", hold),)))
    shown = [(f.nominal.strftime("%H:%M"), f.skip_reason or f"due {f.due_at:%H:%M:%S}") for f in plan.fires]
    later = "(policy latest: a later missed occurrence runs)"
    assert shown == [("11:56", f"misfire: missed by 260s {later}"), ("11:57", f"misfire: missed by 200s {later}"),
                     ("11:58", "due 12:00:20"), ("11:59", "calendar hold"), ("12:00", "calendar hold")]


def test_a_backfill_records_what_the_calendar_skips() -> None:
    daily = Schedule(kind=ScheduleKind.CRON, cron="0 9 * * *", tz="America/New_York")
    holidays = compiled("us-holidays", tz="America/New_York", dates=("2026-11-26",))
    fires = plan_backfill(job(daily), created_at=utc("2026-01-01T00:00:00Z"), start=utc("2026-11-25T00:00:00Z"),
                          end=utc("2026-11-28T00:00:00Z"), now=NOW, limit=10,
                          calendars=JobCalendars(exclude=(("us-holidays", holidays),)))
    assert [(f.nominal.day, f.skip_reason) for f in fires] == [(25, None), (26, "calendar us-holidays"), (27, None)]


@pytest.mark.parametrize(("reason", "kind"), [
    ("calendar us-holidays", "exclude"), ("calendar b: outside it (only)", "only"),
    ("calendar b: unknown (deleted after the job was stored)", "unknown"), ("dst gap: 02:30 ...", None), (None, None)])
def test_the_metric_label_of_a_reason(reason: str | None, kind: str | None) -> None:
    assert skip_kind(reason) == kind


WEEKENDS = compiled("weekends", rules=("weekends",))
NINE_ON_WEEKDAYS = Schedule(kind=ScheduleKind.CRON, cron="0 9 * * 1-5")
YEAR = [
    ("every second, a weekend freeze", EVERY_SECOND, JobCalendars(exclude=(("freeze", compiled(
        "freeze", windows=("fri 16:00-mon 08:00",))),)), None),
    ("weekday mornings, weekends excluded", NINE_ON_WEEKDAYS, JobCalendars(exclude=(("weekends", WEEKENDS),)), None),
    ("weekday mornings, weekdays excluded", NINE_ON_WEEKDAYS, JobCalendars(exclude=(("wd", WEEKDAYS),)),
     "exclude_calendars"),
    ("every second, every day excluded by two", EVERY_SECOND, JobCalendars(exclude=(("wd", WEEKDAYS),
                                                                                    ("we", WEEKENDS))),
     "exclude_calendars"),
    ("weekday mornings, only on weekends", NINE_ON_WEEKDAYS, JobCalendars(only=(("we", WEEKENDS),)),
     "only_calendars"),
    ("an only calendar of past days", EVERY_SECOND, JobCalendars(only=(("past", compiled(
        "past", dates=("2025-12-25",))),)), "only_calendars"),
    ("Christmas yearly, on Christmas", Schedule(kind=ScheduleKind.CRON, cron="0 9 25 12 *"), JobCalendars(
        exclude=(("xmas", compiled("xmas", dates=("2026-12-25", "2027-12-25"))),)), "exclude_calendars"),
    ("once, on a holiday", Schedule(kind=ScheduleKind.AT, at=utc("2026-12-25T09:00:00Z")), JobCalendars(
        exclude=(("xmas", compiled("xmas", dates=("2026-12-25",))),)), "exclude_calendars"),
    ("once, the day after", Schedule(kind=ScheduleKind.AT, at=utc("2026-12-26T09:00:00Z")), JobCalendars(
        exclude=(("xmas", compiled("xmas", dates=("2026-12-25",))),)), None),
    ("every second, only during one hour in March", EVERY_SECOND, JobCalendars(only=(("hour", compiled(
        "hour", windows=("2027-03-01T10:00Z/2027-03-01T11:00Z",))),)), None),
]


@pytest.mark.parametrize(("schedule", "calendars", "refused"), [c[1:] for c in YEAR], ids=[c[0] for c in YEAR])
def test_the_year_check(schedule: Schedule, calendars: JobCalendars, refused: str | None) -> None:
    spec = job(schedule)
    if refused is None:
        exclusions.check_year(spec, calendars, now=NOW, created_at=NOW)
        return
    with pytest.raises(InvalidSpec, match="every occurrence of the job in the year from 2026-12-04 is skipped") \
            as caught:
        exclusions.check_year(spec, calendars, now=NOW, created_at=NOW)
    assert caught.value.field == refused


def test_a_preview_collapses_a_run_of_skipped_occurrences_into_one_row() -> None:
    weekend = compiled("weekend-freeze", windows=("sat 00:00-mon 00:00",))
    rows = exclusions.preview(EVERY_SECOND, utc("2026-12-04T23:59:58Z"), 3,
                              calendars=JobCalendars(exclude=(("weekend-freeze", weekend),)))
    assert [(r["utc"], r["skipped"], r["until"]) for r in rows] == [
        ("2026-12-04T23:59:58+00:00", None, None), ("2026-12-04T23:59:59+00:00", None, None),
        ("2026-12-05T00:00:00+00:00", "calendar weekend-freeze", "2026-12-07T00:00:00+00:00"),
        ("2026-12-07T00:00:00+00:00", None, None)]


def test_a_preview_of_a_daily_job_names_each_skipped_day_and_one_row_for_days_in_a_row() -> None:
    daily = Schedule(kind=ScheduleKind.CRON, cron="0 9 * * *", tz="America/New_York")
    holidays = compiled("us-holidays", tz="America/New_York", dates=("2026-12-25", "2026-12-26", "2026-12-28"))
    rows = exclusions.preview(daily, utc("2026-12-24T15:00:00Z"), 2,
                              calendars=JobCalendars(exclude=(("us-holidays", holidays),)))
    assert [(r["local"], r["skipped"], r["until"]) for r in rows] == [
        ("2026-12-25T09:00:00-05:00", "calendar us-holidays", "2026-12-27T05:00:00+00:00"),
        ("2026-12-27T09:00:00-05:00", None, None), ("2026-12-28T09:00:00-05:00", "calendar us-holidays", None),
        ("2026-12-29T09:00:00-05:00", None, None)]


def test_a_preview_says_when_nothing_later_runs() -> None:
    past = compiled("past", dates=("2025-12-25",))
    rows = exclusions.preview(EVERY_SECOND, NOW, 5, calendars=JobCalendars(only=(("past", past),)))
    assert [(r["skipped"], r["until"]) for r in rows] == [("calendar past: outside it (only)", "never")]


def test_an_occurrence_a_calendar_skipped_misses_no_start_deadline() -> None:
    # Skipped on purpose, as one that came due while the job was paused: its owner hears `skipped`, not start_missed.
    spec = job(EVERY_SECOND, start_deadline_seconds=0.5)
    at = utc("2026-12-04T12:00:04Z")
    skipped = Run(run_id="j.20261204T120004000Z", job="j", state=RunState.SKIPPED, scheduled_at=at, due_at=at,
                  created_at=at, reason="calendar freeze")
    assert missed_deadlines(skipped, spec, at + timedelta(seconds=5)) == []
    other = msgspec.structs.replace(skipped, reason="overlap: j.20261204T120003000Z still active (policy skip)")
    assert missed_deadlines(other, spec, at + timedelta(seconds=5)) == ["start"]

"""Schedule validation: every bad field refused with its name and value; bounded searches; no I/O."""

from __future__ import annotations

import ast
import re
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from jetcron.core.errors import InvalidSpec
from jetcron.core.models import Schedule, ScheduleKind
from jetcron.core.timing.cron import parse_cron, validate_schedule, zone

CREATED = datetime(2026, 1, 1, tzinfo=UTC)
NY = "America/New_York"


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def cron(expr: str, tz: str = "UTC", **kw: Any) -> Schedule:
    return Schedule(kind=ScheduleKind.CRON, cron=expr, tz=tz, **kw)


def test_zone_accepts_iana_names() -> None:
    assert zone("Europe/Berlin").key == "Europe/Berlin"
    assert zone("UTC").key == "UTC"


def named(field: str, value: object) -> str:
    shown = repr(value.isoformat()) if isinstance(value, datetime) else repr(value)
    return rf"^{re.escape(field)}: .*\(got {re.escape(shown[:60])}"


@pytest.mark.parametrize(
    "tz",
    [
        pytest.param("", id="empty"),
        pytest.param(" UTC", id="whitespace"),
        pytest.param("/etc/passwd", id="path"),
        pytest.param("../../etc/passwd", id="dotdot"),
        pytest.param("Factory", id="factory"),
        pytest.param("localtime", id="localtime"),
        pytest.param("Mars/Olympus_Mons", id="unknown"),
    ],
)
def test_zone_rejects(tz: str) -> None:
    with pytest.raises(InvalidSpec, match=named("schedule.tz", tz)):
        zone(tz)


@pytest.mark.parametrize(
    ("expr", "problem"),
    [
        pytest.param("", "expected 5 fields", id="empty"),
        pytest.param("* * * *", "expected 5 fields", id="four_fields"),
        pytest.param("0 0 0 * * * *", "expected 5 fields", id="seven_fields"),
        pytest.param("60 * * * *", "not a valid cron", id="minute_out_of_range"),
        pytest.param("0 24 * * *", "not a valid cron", id="hour_out_of_range"),
        pytest.param("0 0 32 * *", "not a valid cron", id="day_out_of_range"),
        pytest.param("* * * 13 *", "not a valid cron", id="month_out_of_range"),
        pytest.param("60 * * * * *", "not a valid cron", id="second_out_of_range"),
        pytest.param("a b c d e", "not a valid cron", id="garbage"),
        pytest.param("*/0 * * * *", "not a valid cron", id="zero_step"),
        pytest.param("H * * * *", "not a valid cron", id="hash_without_id"),
        pytest.param("@reboot", "unknown alias", id="unknown_alias"),
        pytest.param("1," * 100 + "1 * * * *", "at most 200", id="too_long"),
    ],
)
def test_parse_cron_rejects(expr: str, problem: str) -> None:
    with pytest.raises(InvalidSpec, match=named("schedule.cron", expr)) as info:
        parse_cron(expr)
    assert problem in info.value.problem


BAD_SCHEDULES = [
    pytest.param(cron("0 0 30 2 *"), 1.0, "schedule.cron", "0 0 30 2 *", "can never fire", id="feb_30"),
    pytest.param(cron("0 0 31 4 *"), 1.0, "schedule.cron", "0 0 31 4 *", "can never fire", id="april_31"),
    pytest.param(
        cron("0 0 31 2,4,6,9,11 *"),
        1.0,
        "schedule.cron",
        "0 0 31 2,4,6,9,11 *",
        "can never fire",
        id="short_months_31",
    ),
    pytest.param(
        cron("* * * * * *"),
        60.0,
        "schedule.cron",
        "* * * * * *",
        "more often than every 60 s",
        id="every_second_under_60s_minimum",
    ),
    pytest.param(
        cron("0,30 * * * * *"), 60.0, "schedule.cron", "0,30 * * * * *", "more often", id="half_minute"
    ),
    pytest.param(
        cron("59,0 23,0 * * *"),
        120.0,
        "schedule.cron",
        "59,0 23,0 * * *",
        "more often",
        id="midnight_wrap_gap",
    ),
    pytest.param(cron("0 0 * * *", "Mars/Base"), 1.0, "schedule.tz", "Mars/Base", "unknown", id="bad_tz"),
    pytest.param(
        Schedule(kind=ScheduleKind.EVERY, every_seconds=60, cron="* * * * *"),
        1.0,
        "schedule.cron",
        "* * * * *",
        "not allowed for kind=every",
        id="stray_cron_on_every",
    ),
    pytest.param(
        Schedule(kind=ScheduleKind.CRON, cron="* * * * *", at=utc("2026-05-01T00:00:00Z")),
        1.0,
        "schedule.at",
        utc("2026-05-01T00:00:00Z"),
        "not allowed for kind=cron",
        id="stray_at_on_cron",
    ),
    pytest.param(
        Schedule(kind=ScheduleKind.NOW, every_seconds=5),
        1.0,
        "schedule.every_seconds",
        5,
        "not allowed for kind=now",
        id="stray_every_on_now",
    ),
    pytest.param(Schedule(kind=ScheduleKind.AT), 1.0, "schedule.at", None, "required", id="at_missing"),
    pytest.param(Schedule(kind=ScheduleKind.CRON), 1.0, "schedule.cron", None, "required", id="cron_missing"),
    pytest.param(
        Schedule(kind=ScheduleKind.EVERY), 1.0, "schedule.every_seconds", None, "required", id="every_missing"
    ),
    pytest.param(
        Schedule(kind=ScheduleKind.AT, at=datetime(2026, 5, 1)),
        1.0,
        "schedule.at",
        datetime(2026, 5, 1),
        "UTC offset",
        id="at_naive",
    ),
    pytest.param(
        Schedule(kind=ScheduleKind.AT, at=utc("1999-12-31T23:59:59Z")),
        1.0,
        "schedule.at",
        utc("1999-12-31T23:59:59Z"),
        "between the years",
        id="at_before_2000",
    ),
    pytest.param(
        Schedule(kind=ScheduleKind.AT, at=utc("2201-01-01T00:00:00Z")),
        1.0,
        "schedule.at",
        utc("2201-01-01T00:00:00Z"),
        "between the years",
        id="at_after_2200",
    ),
    pytest.param(
        Schedule(kind=ScheduleKind.AT, at=datetime.fromisoformat("9999-12-31T23:59:59-01:00")),
        1.0,
        "schedule.at",
        datetime.fromisoformat("9999-12-31T23:59:59-01:00"),
        "between the years",
        id="at_past_the_last_utc_datetime",
    ),
    pytest.param(
        Schedule(kind=ScheduleKind.EVERY, every_seconds=60,
                 anchor=datetime.fromisoformat("0001-01-01T00:00:00+01:00")),
        1.0,
        "schedule.anchor",
        datetime.fromisoformat("0001-01-01T00:00:00+01:00"),
        "between the years",
        id="anchor_before_the_first_utc_datetime",
    ),
    pytest.param(
        Schedule(kind=ScheduleKind.EVERY, every_seconds=60, anchor=datetime(2026, 1, 1)),
        1.0,
        "schedule.anchor",
        datetime(2026, 1, 1),
        "UTC offset",
        id="anchor_naive",
    ),
    pytest.param(
        Schedule(kind=ScheduleKind.EVERY, every_seconds=float("nan")),
        1.0,
        "schedule.every_seconds",
        float("nan"),
        "finite",
        id="every_nan",
    ),
    pytest.param(
        Schedule(kind=ScheduleKind.EVERY, every_seconds=float("inf")),
        1.0,
        "schedule.every_seconds",
        float("inf"),
        "finite",
        id="every_inf",
    ),
    pytest.param(
        Schedule(kind=ScheduleKind.EVERY, every_seconds=0.0),
        1.0,
        "schedule.every_seconds",
        0.0,
        "between",
        id="every_zero",
    ),
    pytest.param(
        Schedule(kind=ScheduleKind.EVERY, every_seconds=-5.0),
        1.0,
        "schedule.every_seconds",
        -5.0,
        "between",
        id="every_negative",
    ),
    pytest.param(
        Schedule(kind=ScheduleKind.EVERY, every_seconds=0.5),
        1.0,
        "schedule.every_seconds",
        0.5,
        "between 1 s",
        id="every_under_minimum",
    ),
    pytest.param(
        Schedule(kind=ScheduleKind.EVERY, every_seconds=366 * 86400 + 1.0),
        1.0,
        "schedule.every_seconds",
        366 * 86400 + 1.0,
        "366 days",
        id="every_over_366_days",
    ),
]


@pytest.mark.parametrize(("schedule", "minimum", "field", "value", "problem"), BAD_SCHEDULES)
def test_validate_rejects(
    schedule: Schedule, minimum: float, field: str, value: object, problem: str
) -> None:
    with pytest.raises(InvalidSpec, match=named(field, value)) as info:
        validate_schedule(schedule, created_at=CREATED, min_interval_seconds=minimum)
    assert problem in info.value.problem


@pytest.mark.parametrize(
    ("schedule", "minimum"),
    [
        pytest.param(cron("* * * * * *"), 1.0, id="every_second_at_1s_minimum"),
        pytest.param(cron("* * * * *"), 60.0, id="every_minute_at_60s_minimum"),
        pytest.param(cron("0 0 29 2 *"), 60.0, id="leap_day_fires_2028"),
        pytest.param(cron("30 2 * * *", NY), 60.0, id="gap_time_is_fine"),
        pytest.param(cron("0 0 * * 1#5"), 60.0, id="fifth_monday"),
        pytest.param(cron("0 0 L 2 *"), 60.0, id="last_day_of_february"),
        pytest.param(Schedule(kind=ScheduleKind.EVERY, every_seconds=366 * 86400), 1.0, id="every_366_days"),
        pytest.param(
            Schedule(kind=ScheduleKind.AT, at=utc("2026-05-01T12:00:00+02:00")), 1.0, id="at_with_offset"
        ),
        pytest.param(Schedule(kind=ScheduleKind.NOW), 1.0, id="now"),
    ],
)
def test_validate_accepts(schedule: Schedule, minimum: float) -> None:
    validate_schedule(schedule, created_at=CREATED, min_interval_seconds=minimum)


def test_never_firing_cron_search_is_bounded() -> None:
    # Given expressions that can never fire, when validated, then each is refused quickly (croniter
    # stops after a fixed number of years; the bound here is generous so it cannot flake)
    started = time.perf_counter()
    for expr in ("0 0 30 2 *", "0 0 31 4 *", "0 0 31 9,11 *", "* * 30 2 *", "*/5 * * 31 2 *"):
        with pytest.raises(InvalidSpec, match="can never fire"):
            validate_schedule(cron(expr), created_at=CREATED)
    assert time.perf_counter() - started < 2.0


def test_core_schedule_modules_do_no_io() -> None:
    forbidden = {"nats", "asyncio", "os", "time", "socket", "subprocess"}
    for name in ("cron.py", "triggers.py"):
        tree = ast.parse((Path(__file__).parents[2] / "libs" / "jetcron" / "core" / "timing" / name).read_text())
        imported = {
            a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names
        }
        imported |= {(n.module or "").split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        assert not imported & forbidden, (name, imported & forbidden)

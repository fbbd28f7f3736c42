"""Schedules: nominal fire times and the DST rules, with real 2026 transitions."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from croniter import croniter
from hypothesis import given, settings
from hypothesis import strategies as st

from jetcron.core.models import FoldPolicy, GapPolicy, Schedule, ScheduleKind
from jetcron.core.timing.cron import dst_note, next_fires, occurrences, parse_cron, zone

CREATED = datetime(2026, 1, 1, tzinfo=UTC)
NY, BERLIN, LORD_HOWE = "America/New_York", "Europe/Berlin", "Australia/Lord_Howe"


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def cron(expr: str, tz: str = "UTC", **kw: Any) -> Schedule:
    return Schedule(kind=ScheduleKind.CRON, cron=expr, tz=tz, **kw)


def fires(schedule: Schedule, after: str, count: int) -> list[tuple[str, str | None]]:
    found = next_fires(schedule, utc(after), count, created_at=CREATED)
    return [(o.at.strftime("%Y-%m-%dT%H:%M:%SZ"), o.skipped) for o in found]


GAP_NY = "dst gap: 02:30 does not exist in America/New_York on 2026-03-08"

DST_CASES = [
    pytest.param(
        cron("30 2 * * *", NY),
        "2026-03-08T00:00:00Z",
        [("2026-03-08T07:00:00Z", None), ("2026-03-09T06:30:00Z", None)],
        id="spring_forward_gap_shift",
    ),
    pytest.param(
        cron("30 2 * * *", NY, on_gap=GapPolicy.SKIP),
        "2026-03-08T00:00:00Z",
        [("2026-03-08T07:00:00Z", GAP_NY), ("2026-03-09T06:30:00Z", None)],
        id="spring_forward_gap_skip",
    ),
    pytest.param(
        cron("*/15 2 * * *", NY),
        "2026-03-08T05:00:00Z",
        [("2026-03-08T07:00:00Z", None), ("2026-03-09T06:00:00Z", None), ("2026-03-09T06:15:00Z", None)],
        id="gap_times_shift_to_one_occurrence",
    ),
    pytest.param(
        cron("*/15 2 * * *", NY, on_gap=GapPolicy.SKIP),
        "2026-03-08T05:00:00Z",
        [
            ("2026-03-08T07:00:00Z", "dst gap: 02:00 does not exist in America/New_York on 2026-03-08"),
            ("2026-03-09T06:00:00Z", None),
        ],
        id="gap_times_skip_as_one_record",
    ),
    pytest.param(
        cron("0,30 2,3 * * *", NY, on_gap=GapPolicy.SKIP),
        "2026-03-08T06:00:00Z",
        [("2026-03-08T07:00:00Z", None), ("2026-03-08T07:30:00Z", None)],
        id="gap_skip_yields_to_real_time_at_same_instant",
    ),
    pytest.param(
        cron("* * 1-3 * * *", NY),
        "2026-03-08T06:59:58Z",
        [("2026-03-08T06:59:59Z", None), ("2026-03-08T07:00:00Z", None), ("2026-03-08T07:00:01Z", None)],
        id="every_second_across_gap_seconds_first",
    ),
    pytest.param(
        cron("30 1 * * *", NY),
        "2026-11-01T00:00:00Z",
        [("2026-11-01T05:30:00Z", None), ("2026-11-02T06:30:00Z", None)],
        id="fall_back_fold_first",
    ),
    pytest.param(
        cron("30 1 * * *", NY, on_fold=FoldPolicy.LAST),
        "2026-11-01T00:00:00Z",
        [("2026-11-01T06:30:00Z", None), ("2026-11-02T06:30:00Z", None)],
        id="fall_back_fold_last",
    ),
    pytest.param(
        cron("30 1 * * *", NY, on_fold=FoldPolicy.BOTH),
        "2026-11-01T00:00:00Z",
        [("2026-11-01T05:30:00Z", None), ("2026-11-01T06:30:00Z", None), ("2026-11-02T06:30:00Z", None)],
        id="fall_back_fold_both",
    ),
    pytest.param(
        cron("30 1 * * *", NY),
        "2026-11-01T05:45:00Z",
        [("2026-11-02T06:30:00Z", None)],
        id="fall_back_fold_first_not_again_in_second_pass",
    ),
    pytest.param(
        cron("30 * * * *", NY),
        "2026-11-01T04:00:00Z",
        [
            ("2026-11-01T04:30:00Z", None),
            ("2026-11-01T05:30:00Z", None),
            ("2026-11-01T06:30:00Z", None),
            ("2026-11-01T07:30:00Z", None),
        ],
        id="wildcard_hour_fold_runs_twice",
    ),
    pytest.param(
        cron("30 * * * *", NY),
        "2026-11-01T05:40:00Z",
        [("2026-11-01T06:30:00Z", None), ("2026-11-01T07:30:00Z", None)],
        id="wildcard_hour_second_pass_found_from_inside_first_pass",
    ),
    pytest.param(
        cron("*/20 * * * *", NY, on_fold=FoldPolicy.FIRST),
        "2026-11-01T04:50:00Z",
        [
            ("2026-11-01T05:00:00Z", None),
            ("2026-11-01T05:20:00Z", None),
            ("2026-11-01T05:40:00Z", None),
            ("2026-11-01T06:00:00Z", None),
            ("2026-11-01T06:20:00Z", None),
            ("2026-11-01T06:40:00Z", None),
            ("2026-11-01T07:00:00Z", None),
        ],
        id="wildcard_hour_fold_interleaves_in_utc_order",
    ),
    pytest.param(
        cron("30 2 * * *", BERLIN),
        "2026-03-28T12:00:00Z",
        [("2026-03-29T01:00:00Z", None), ("2026-03-30T00:30:00Z", None)],
        id="berlin_spring_gap_shift",
    ),
    pytest.param(
        cron("30 2 * * *", BERLIN),
        "2026-10-24T12:00:00Z",
        [("2026-10-25T00:30:00Z", None), ("2026-10-26T01:30:00Z", None)],
        id="berlin_fall_fold_first",
    ),
    pytest.param(
        cron("30 2 * * *", BERLIN, on_fold=FoldPolicy.LAST),
        "2026-10-24T12:00:00Z",
        [("2026-10-25T01:30:00Z", None), ("2026-10-26T01:30:00Z", None)],
        id="berlin_fall_fold_last",
    ),
    pytest.param(
        cron("30 */2 * * *", BERLIN),
        "2026-10-24T23:00:00Z",
        [("2026-10-25T00:30:00Z", None), ("2026-10-25T01:30:00Z", None), ("2026-10-25T03:30:00Z", None),
         ("2026-10-25T05:30:00Z", None)],
        id="berlin_step_hour_is_a_wildcard_both_passes_of_the_fold",
    ),
    pytest.param(
        cron("0 2 * * *", LORD_HOWE),
        "2026-10-03T00:00:00Z",
        [("2026-10-03T15:30:00Z", None), ("2026-10-04T15:00:00Z", None)],
        id="lord_howe_half_hour_gap",
    ),
    pytest.param(
        cron("15 2 * * *", LORD_HOWE, on_gap=GapPolicy.SKIP),
        "2026-10-03T00:00:00Z",
        [
            ("2026-10-03T15:30:00Z", "dst gap: 02:15 does not exist in Australia/Lord_Howe on 2026-10-04"),
            ("2026-10-04T15:15:00Z", None),
        ],
        id="lord_howe_half_hour_gap_skip",
    ),
    pytest.param(
        cron("45 1 * * *", LORD_HOWE),
        "2026-04-04T00:00:00Z",
        [("2026-04-04T14:45:00Z", None), ("2026-04-05T15:15:00Z", None)],
        id="lord_howe_half_hour_fold_first",
    ),
    pytest.param(
        cron("45 1 * * *", LORD_HOWE, on_fold=FoldPolicy.BOTH),
        "2026-04-04T00:00:00Z",
        [("2026-04-04T14:45:00Z", None), ("2026-04-04T15:15:00Z", None), ("2026-04-05T15:15:00Z", None)],
        id="lord_howe_half_hour_fold_both",
    ),
    pytest.param(
        cron("15 1 * * *", LORD_HOWE),
        "2026-04-04T00:00:00Z",
        [("2026-04-04T14:15:00Z", None), ("2026-04-05T14:45:00Z", None)],
        id="lord_howe_before_fold_runs_once",
    ),
]


@pytest.mark.parametrize(("schedule", "after", "expected"), DST_CASES)
def test_dst_rules(schedule: Schedule, after: str, expected: list[tuple[str, str | None]]) -> None:
    assert fires(schedule, after, len(expected)) == expected


PLAIN_CASES = [
    pytest.param(
        cron("30 0 12 * * *"),
        "2026-05-01T00:00:00Z",
        ["2026-05-01T12:00:30Z", "2026-05-02T12:00:30Z"],
        id="six_fields_seconds_first",
    ),
    pytest.param(
        cron("*/20 * * * * *"),
        "2026-05-01T00:00:00Z",
        ["2026-05-01T00:00:20Z", "2026-05-01T00:00:40Z", "2026-05-01T00:01:00Z"],
        id="every_20_seconds",
    ),
    pytest.param(cron("@hourly"), "2026-05-01T00:00:00Z", ["2026-05-01T01:00:00Z"], id="alias_hourly"),
    pytest.param(cron("@daily", NY), "2026-05-01T00:00:00Z", ["2026-05-01T04:00:00Z"], id="alias_daily_ny"),
    pytest.param(cron("@midnight"), "2026-05-01T00:00:00Z", ["2026-05-02T00:00:00Z"], id="alias_midnight"),
    pytest.param(cron("@weekly"), "2026-05-01T00:00:00Z", ["2026-05-03T00:00:00Z"], id="alias_weekly_sunday"),
    pytest.param(cron("@monthly"), "2026-05-01T00:00:00Z", ["2026-06-01T00:00:00Z"], id="alias_monthly"),
    pytest.param(cron("@yearly"), "2026-05-01T00:00:00Z", ["2027-01-01T00:00:00Z"], id="alias_yearly"),
    pytest.param(cron("@annually"), "2026-05-01T00:00:00Z", ["2027-01-01T00:00:00Z"], id="alias_annually"),
    pytest.param(cron("0 0 29 2 *"), "2026-05-01T00:00:00Z", ["2028-02-29T00:00:00Z"], id="leap_day"),
    pytest.param(
        Schedule(kind=ScheduleKind.NOW),
        "2025-12-31T23:59:59Z",
        ["2026-01-01T00:00:00Z"],
        id="now_once_at_creation",
    ),
    pytest.param(Schedule(kind=ScheduleKind.NOW), "2026-01-01T00:00:00Z", [], id="now_already_covered"),
    pytest.param(
        Schedule(kind=ScheduleKind.AT, at=utc("2026-05-01T12:00:00+02:00")),
        "2026-01-01T00:00:00Z",
        ["2026-05-01T10:00:00Z"],
        id="at_converted_to_utc",
    ),
    pytest.param(
        Schedule(kind=ScheduleKind.AT, at=utc("2026-05-01T10:00:00Z")),
        "2026-05-01T10:00:00Z",
        [],
        id="at_strictly_after",
    ),
    pytest.param(
        Schedule(kind=ScheduleKind.EVERY, every_seconds=90),
        "2025-12-31T23:59:59Z",
        ["2026-01-01T00:00:00Z", "2026-01-01T00:01:30Z", "2026-01-01T00:03:00Z"],
        id="every_from_creation",
    ),
    pytest.param(
        Schedule(kind=ScheduleKind.EVERY, every_seconds=3600, anchor=utc("2026-01-01T00:00:10Z")),
        "2026-03-01T01:00:10Z",
        ["2026-03-01T02:00:10Z", "2026-03-01T03:00:10Z"],
        id="every_anchored_strictly_after",
    ),
    pytest.param(
        Schedule(kind=ScheduleKind.EVERY, every_seconds=7200, anchor=utc("2026-06-01T00:00:00Z")),
        "2026-01-01T00:00:00Z",
        ["2026-06-01T00:00:00Z", "2026-06-01T02:00:00Z"],
        id="every_future_anchor_starts_at_anchor",
    ),
]


@pytest.mark.parametrize(("schedule", "after", "expected"), PLAIN_CASES)
def test_plain_occurrences(schedule: Schedule, after: str, expected: list[str]) -> None:
    assert [at for at, _ in fires(schedule, after, len(expected) + (0 if expected else 1))] == expected


def test_every_is_lazy_and_exact_far_from_anchor() -> None:
    # Given a 0.1 s interval, when asked a decade out, then no float drift and no walk from the anchor
    schedule = Schedule(kind=ScheduleKind.EVERY, every_seconds=0.1)
    found = next_fires(schedule, utc("2036-01-01T00:00:00Z"), 2, created_at=CREATED)
    assert [o.at for o in found] == [utc("2036-01-01T00:00:00.100000Z"), utc("2036-01-01T00:00:00.200000Z")]


@pytest.mark.parametrize(
    ("expr", "form", "wildcard"),
    [
        pytest.param("0 * * * *", "0 * * * *", True, id="star_hour"),
        pytest.param("0 0-23 * * *", "0 0-23 * * *", True, id="full_range_hour"),
        pytest.param("0 */1 * * *", "0 */1 * * *", True, id="step_one_hour"),
        pytest.param("0 */2 * * *", "0 */2 * * *", True, id="step_two_is_a_wildcard_as_in_vixie"),
        pytest.param("0 1-23/2 * * *", "0 1-23/2 * * *", False, id="stepped_range_is_fixed"),
        pytest.param("0 1 * * *", "0 1 * * *", False, id="fixed_hour"),
        pytest.param("5 0 12 * * *", "0 12 * * * 5", False, id="seconds_first_moved_last"),
        pytest.param("@hourly", "0 * * * *", True, id="alias"),
    ],
)
def test_parse_cron(expr: str, form: str, wildcard: bool) -> None:
    parsed = parse_cron(expr)
    assert (parsed.croniter_form, parsed.wildcard_hour) == (form, wildcard)


# -- properties ---------------------------------------------------------------------------------

MINUTES = ["*", "0", "30", "*/15", "0,45", "5-10", "59"]
HOURS = ["*", "1", "2", "1-3", "*/2", "0,2", "23"]
DAYS = ["*", "1", "*/2", "1-7"]
ZONES = ["UTC", NY, BERLIN, LORD_HOWE, "America/Sao_Paulo", "Asia/Tehran"]
TRANSITIONS = [
    utc(t)
    for t in (
        "2026-03-08T07:00:00Z",
        "2026-11-01T06:00:00Z",
        "2026-03-29T01:00:00Z",
        "2026-10-25T01:00:00Z",
        "2026-04-04T15:00:00Z",
        "2026-10-03T15:30:00Z",
    )
]

schedules = st.builds(
    lambda m, h, d, tz, gap, fold: cron(f"{m} {h} {d} * *", tz, on_gap=gap, on_fold=fold),
    st.sampled_from(MINUTES),
    st.sampled_from(HOURS),
    st.sampled_from(DAYS),
    st.sampled_from(ZONES),
    st.sampled_from(GapPolicy),
    st.sampled_from(FoldPolicy),
)
# Start near a real transition most of the time: that is where the rules can go wrong.
afters = st.builds(
    lambda t, minutes: t + timedelta(minutes=minutes),
    st.sampled_from(TRANSITIONS),
    st.integers(-3 * 1440, 1440),
)


@settings(max_examples=150, deadline=None)
@given(schedules, afters)
def test_property_increasing_and_never_in_a_gap(schedule: Schedule, after: datetime) -> None:
    found = next_fires(schedule, after, 40, created_at=CREATED)
    tz = zone(schedule.tz)
    assert all(a.at < b.at for a, b in itertools.pairwise(found))
    assert not found or found[0].at > after
    for occ in found:
        assert occ.at.microsecond == 0 and occ.at.tzinfo is UTC
        local = occ.at.astimezone(tz)
        wall = local.replace(tzinfo=None)
        # The wall time exists: it maps back to the same instant (a time in a gap would not).
        assert wall.replace(tzinfo=tz, fold=local.fold).astimezone(UTC) == occ.at
        shifted = (occ.at - timedelta(seconds=1)).astimezone(tz).utcoffset() != local.utcoffset()
        # Either the expression matches this wall time, or it is the first instant after a gap.
        assert croniter.match(parse_cron(schedule.cron or "").croniter_form, wall) or shifted
        assert occ.skipped is None or (shifted and schedule.on_gap is GapPolicy.SKIP)


@settings(max_examples=100, deadline=None)
@given(schedules, afters, st.integers(1, 30), st.integers(1, 30))
def test_property_continuing_loses_nothing(
    schedule: Schedule, after: datetime, first: int, more: int
) -> None:
    head = next_fires(schedule, after, first, created_at=CREATED)
    tail = next_fires(schedule, head[-1].at, more, created_at=CREATED)
    assert head + tail == next_fires(schedule, after, first + more, created_at=CREATED)


def test_occurrences_is_lazy() -> None:
    stream = occurrences(cron("* * * * * *"), utc("2026-01-01T00:00:00Z"), created_at=CREATED)
    assert next(stream).at == utc("2026-01-01T00:00:01Z")


@pytest.mark.parametrize(("schedule", "after", "notes"), [
    pytest.param(cron("30 1 * * *", NY), "2026-10-31T12:00:00Z",
                 ["dst fold: 01:30 happens twice in America/New_York on 2026-11-01; it runs once, in the first pass "
                  "(on_fold first)", None], id="fold_first"),
    pytest.param(cron("30 1 * * *", NY, on_fold=FoldPolicy.LAST), "2026-10-31T12:00:00Z",
                 ["dst fold: 01:30 happens twice in America/New_York on 2026-11-01; it runs once, in the second pass "
                  "(on_fold last)", None], id="fold_last"),
    pytest.param(cron("30 1 * * *", NY, on_fold=FoldPolicy.BOTH), "2026-10-31T12:00:00Z",
                 ["dst fold: 01:30 happens twice in America/New_York on 2026-11-01; it runs in both passes, this is "
                  "the first", "dst fold: 01:30 happens twice in America/New_York on 2026-11-01; it runs in both "
                  "passes, this is the second", None], id="fold_both"),
    pytest.param(cron("30 2 * * *", NY), "2026-03-07T12:00:00Z",
                 ["dst gap: 02:30 does not exist in America/New_York on 2026-03-08; it runs at 03:00 (on_gap shift)",
                  None], id="gap_shifted"),
    pytest.param(cron("0 * * * *", BERLIN), "2026-03-29T00:30:00Z",
                 ["dst gap: 02:00 does not exist in Europe/Berlin on 2026-03-29; it runs at 03:00 (on_gap shift), "
                  "one run with 03:00's own", None], id="gap_shared_with_a_fire"),
    pytest.param(cron("30 3 * * *", NY), "2026-03-07T12:00:00Z", [None, None], id="after_a_gap_not_in_it"),
    pytest.param(Schedule(kind=ScheduleKind.EVERY, every_seconds=1800, tz=NY), "2026-11-01T05:10:00Z", [None, None],
                 id="every_fires_at_instants"),
])
def test_a_dst_note_says_what_a_change_of_offset_does_to_a_fire_time(schedule: Schedule, after: str,
                                                                    notes: list[str | None]) -> None:
    found = next_fires(schedule, utc(after), len(notes), created_at=CREATED)
    assert [dst_note(schedule, o.at) for o in found] == notes

"""Trigger policies: jitter, overlap, backfill, and repeated planning that never loses a nominal."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jetcron.core.errors import InvalidSpec
from jetcron.core.ids import stable_fraction
from jetcron.core.models import (
    GapPolicy,
    JitterPolicy,
    JobSpec,
    MisfireKind,
    MisfirePolicy,
    OverlapPolicy,
    Schedule,
    ScheduleKind,
)
from jetcron.core.timing.cron import occurrences
from jetcron.core.timing.triggers import (
    FirePlan,
    OverlapAction,
    decide_overlap,
    jitter_offset,
    next_wake,
    pace_backfill,
    plan_backfill,
    plan_fires,
    staging_horizon,
)

CREATED = datetime(2026, 1, 1, tzinfo=UTC)


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def iso(at: datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


def job(schedule: Schedule, name: str = "job", **kw: Any) -> JobSpec:
    return JobSpec(name=name, command=["true"], schedule=schedule, **kw)


def every(seconds: float, **kw: Any) -> Schedule:
    return Schedule(kind=ScheduleKind.EVERY, every_seconds=seconds, **kw)


def cron(expr: str, tz: str = "UTC", **kw: Any) -> Schedule:
    return Schedule(kind=ScheduleKind.CRON, cron=expr, tz=tz, **kw)


def plan(spec: JobSpec, *, cursor: str | None, now: str, horizon: float = 0.0, **kw: Any) -> FirePlan:
    return plan_fires(
        spec,
        created_at=CREATED,
        cursor=utc(cursor) if cursor else None,
        now=utc(now),
        horizon_seconds=horizon,
        rng=random.Random(7),
        **kw,
    )


def table(p: FirePlan) -> list[tuple[str, str, str | None]]:
    """(nominal, due_at, skip reason) rows: the plan as a reader checks it."""
    return [(iso(f.nominal), iso(f.due_at), f.skip_reason) for f in p.fires]


# -- jitter ---------------------------------------------------------------------------------------


def test_jitter_same_name_same_offset() -> None:
    policy = JitterPolicy(window_seconds=60)
    assert jitter_offset("alpha", policy, random.Random(1)) == jitter_offset(
        "alpha", policy, random.Random(2)
    )
    assert jitter_offset("alpha", policy, random.Random(1)) == pytest.approx(33.47530845656499)


def test_jitter_spreads_names_over_the_window() -> None:
    policy = JitterPolicy(window_seconds=60)
    offsets = [jitter_offset(f"job-{i}", policy, random.Random(0)) for i in range(200)]
    assert all(0 <= o < 60 for o in offsets)
    assert len(set(offsets)) == 200
    assert min(offsets) < 5 and max(offsets) > 55  # the midnight herd is spread, not bunched


def test_jitter_random_part_is_bounded_and_seeded() -> None:
    policy = JitterPolicy(window_seconds=60, random_seconds=10)
    fixed = stable_fraction("alpha") * 60
    draws = [jitter_offset("alpha", policy, random.Random(seed)) - fixed for seed in range(50)]
    assert all(0 <= d < 10 for d in draws) and len(set(draws)) > 40
    assert jitter_offset("alpha", policy, random.Random(3)) == jitter_offset(
        "alpha", policy, random.Random(3)
    )


def test_jitter_moves_due_not_nominal() -> None:
    spec = job(cron("0 0 * * *"), name="alpha", jitter=JitterPolicy(window_seconds=60))
    result = plan(spec, cursor="2026-01-01T00:00:00Z", now="2026-01-01T23:59:00Z", horizon=120)
    [fire] = result.fires
    assert fire.nominal == utc("2026-01-02T00:00:00Z")
    assert fire.due_at == utc("2026-01-02T00:00:33.475308Z")
    assert result.next_wake == utc("2026-01-02T23:58:33.475308Z")


# -- overlap ----------------------------------------------------------------------------------------

A = OverlapAction
OVERLAP_CASES = [
    (OverlapPolicy.ALLOW, 0, 0, A.START),
    (OverlapPolicy.ALLOW, 0, 1, A.START),
    (OverlapPolicy.ALLOW, 1, 0, A.START),
    (OverlapPolicy.ALLOW, 1, 1, A.START),
    (OverlapPolicy.ALLOW, 2, 0, A.START),
    (OverlapPolicy.ALLOW, 2, 1, A.START),
    (OverlapPolicy.SKIP, 0, 0, A.START),
    (OverlapPolicy.SKIP, 0, 1, A.START),
    (OverlapPolicy.SKIP, 1, 0, A.SKIP),
    (OverlapPolicy.SKIP, 1, 1, A.SKIP),
    (OverlapPolicy.SKIP, 2, 0, A.SKIP),
    (OverlapPolicy.SKIP, 2, 1, A.SKIP),
    (OverlapPolicy.BUFFER_ONE, 0, 0, A.START),
    (OverlapPolicy.BUFFER_ONE, 0, 1, A.START),
    (OverlapPolicy.BUFFER_ONE, 1, 0, A.BUFFER),
    (OverlapPolicy.BUFFER_ONE, 1, 1, A.SKIP),
    (OverlapPolicy.BUFFER_ONE, 2, 0, A.BUFFER),
    (OverlapPolicy.BUFFER_ONE, 2, 1, A.SKIP),
    (OverlapPolicy.CANCEL_PREVIOUS, 0, 0, A.START),
    (OverlapPolicy.CANCEL_PREVIOUS, 0, 1, A.START),
    (OverlapPolicy.CANCEL_PREVIOUS, 1, 0, A.CANCEL_PREVIOUS),
    (OverlapPolicy.CANCEL_PREVIOUS, 1, 1, A.CANCEL_PREVIOUS),
    (OverlapPolicy.CANCEL_PREVIOUS, 2, 0, A.CANCEL_PREVIOUS),
    (OverlapPolicy.CANCEL_PREVIOUS, 2, 1, A.CANCEL_PREVIOUS),
]


@pytest.mark.parametrize(
    ("policy", "active", "buffered", "action"),
    [pytest.param(*c, id=f"{c[0].value}-active{c[1]}-buffered{c[2]}") for c in OVERLAP_CASES],
)
def test_overlap(policy: OverlapPolicy, active: int, buffered: int, action: OverlapAction) -> None:
    assert decide_overlap(policy, active, buffered) is action


def test_overlap_table_covers_every_combination() -> None:
    assert {(p, a, b) for p, a, b, _ in OVERLAP_CASES} == {
        (p, a, b) for p in OverlapPolicy for a in (0, 1, 2) for b in (0, 1)
    }


# -- backfill ---------------------------------------------------------------------------------------


def backfill(spec: JobSpec, start: str, end: str, limit: int = 100, now: str = "2026-02-01T00:00:00Z") -> Any:
    return plan_backfill(spec, created_at=CREATED, start=utc(start), end=utc(end), now=utc(now), limit=limit)


def test_backfill_start_inclusive_end_exclusive() -> None:
    fires = backfill(job(every(3600)), "2026-01-01T00:00:00Z", "2026-01-01T03:00:00Z")
    assert [(iso(f.nominal), iso(f.due_at), f.skip_reason) for f in fires] == [
        ("2026-01-01T00:00:00Z", "2026-01-01T00:00:00Z", None),
        ("2026-01-01T01:00:00Z", "2026-01-01T01:00:00Z", None),
        ("2026-01-01T02:00:00Z", "2026-01-01T02:00:00Z", None),
    ]


def test_backfill_keeps_dst_skips() -> None:
    spec = job(cron("30 2 * * *", "America/New_York", on_gap=GapPolicy.SKIP))
    fires = backfill(spec, "2026-03-07T00:00:00Z", "2026-03-09T00:00:00Z", now="2026-04-01T00:00:00Z")
    assert [(iso(f.nominal), f.skip_reason) for f in fires] == [
        ("2026-03-07T07:30:00Z", None),
        ("2026-03-08T07:00:00Z", "dst gap: 02:30 does not exist in America/New_York on 2026-03-08"),
    ]


@pytest.mark.parametrize(
    ("start", "end", "limit", "match"),
    [
        pytest.param(
            "2026-01-01T00:00:00Z",
            "2026-01-01T05:00:00Z",
            4,
            r"^backfill: the range holds more than 4",
            id="over_limit",
        ),
        pytest.param(
            "2026-01-01T05:00:00Z",
            "2026-01-01T05:00:00Z",
            10,
            r"^backfill: start must be before end",
            id="empty_range",
        ),
        pytest.param(
            "2026-01-01T06:00:00Z",
            "2026-01-01T05:00:00Z",
            10,
            r"^backfill: start must be before end",
            id="reversed_range",
        ),
        pytest.param(
            "2026-01-01T00:00:00Z",
            "2026-03-01T00:00:00Z",
            10000,
            r"^backfill\.end: must not be after now .*\(got '2026-03-01T00:00:00\+00:00'\)",
            id="end_in_future",
        ),
        pytest.param(
            "1900-01-01T00:00:00Z",
            "2026-01-01T00:00:00Z",
            10000,
            r"^backfill\.start: must lie between the years 2000 and 2200",
            id="start_before_2000",
        ),
        pytest.param(
            "0001-01-01T00:00:00+01:00",
            "2026-01-01T00:00:00Z",
            10000,
            r"^backfill\.start: must lie between the years 2000 and 2200",
            id="start_before_the_first_utc_datetime",
        ),
    ],
)
def test_backfill_rejects(start: str, end: str, limit: int, match: str) -> None:
    with pytest.raises(InvalidSpec, match=match):
        backfill(job(every(3600)), start, end, limit=limit)


BACKFILL_NOW = utc("2026-02-01T00:00:00Z")


def paced(spec: JobSpec, active_run: str = "") -> list[tuple[str, str, str | None, str]]:
    """(nominal, due, skip reason, waits for) rows of a three-day backfill across the New York gap."""
    fires = backfill(spec, "2026-03-07T00:00:00Z", "2026-03-10T00:00:00Z", now="2026-04-01T00:00:00Z")
    rows = pace_backfill(spec, fires, now=BACKFILL_NOW, rate_per_second=4, active_run=active_run)
    return [(iso(r.fire.nominal), r.fire.due_at.strftime("%S.%f"), r.fire.skip_reason, r.after) for r in rows]


GAP_SKIP = "dst gap: 02:30 does not exist in America/New_York on 2026-03-08"
NY_GAP = cron("30 2 * * *", "America/New_York", on_gap=GapPolicy.SKIP)


def test_backfill_under_allow_is_paced_not_chained() -> None:
    # Given overlap allow and 4 runs per second, then runs start 250 ms apart, and the DST skip stays a skip
    assert paced(job(NY_GAP, name="nightly"), active_run="nightly.20260306T073000Z") == [
        ("2026-03-07T07:30:00Z", "00.000000", None, ""),
        ("2026-03-08T07:00:00Z", "00.000000", GAP_SKIP, ""),
        ("2026-03-09T06:30:00Z", "00.250000", None, ""),
    ]


@pytest.mark.parametrize("policy", [OverlapPolicy.SKIP, OverlapPolicy.BUFFER_ONE, OverlapPolicy.CANCEL_PREVIOUS])
def test_backfill_under_other_overlap_policies_is_a_chain(policy: OverlapPolicy) -> None:
    # Given a policy that forbids two runs at once, then each backfilled run waits for the one before it,
    # the first for the job's active run; none is skipped or cancelled for overlap
    assert paced(job(NY_GAP, name="nightly", overlap=policy), active_run="nightly.20260306T073000Z") == [
        ("2026-03-07T07:30:00Z", "00.000000", None, "nightly.20260306T073000Z"),
        ("2026-03-08T07:00:00Z", "00.000000", GAP_SKIP, ""),
        ("2026-03-09T06:30:00Z", "00.250000", None, "nightly.20260307T073000000Z"),
    ]


def test_backfill_rate_must_be_positive() -> None:
    with pytest.raises(InvalidSpec, match=r"^backfill\.rate: must be a positive number"):
        pace_backfill(job(every(60)), [], now=BACKFILL_NOW, rate_per_second=0)


@pytest.mark.parametrize(("policy", "horizon"), [
    pytest.param(OverlapPolicy.ALLOW, 2.0, id="allow_staged_ahead"),
    pytest.param(OverlapPolicy.SKIP, 0.0, id="skip_decided_at_due_time"),
    pytest.param(OverlapPolicy.BUFFER_ONE, 0.0, id="buffer_one_decided_at_due_time"),
    pytest.param(OverlapPolicy.CANCEL_PREVIOUS, 0.0, id="cancel_previous_decided_at_due_time"),
])
def test_staging_horizon(policy: OverlapPolicy, horizon: float) -> None:
    assert staging_horizon(job(every(1), overlap=policy), 2.0) == horizon


# -- property: repeated planning never loses or doubles a nominal -------------------------------

specs = st.builds(
    lambda sched, kind, catchup: job(sched, misfire=MisfirePolicy(kind=kind, max_catchup=catchup)),
    st.one_of(
        st.sampled_from([every(1), every(7), every(60.5), every(3600)]),
        st.sampled_from(
            [
                cron("*/5 * * * *"),
                cron("30 1 * * *", "America/New_York"),
                cron("*/10 2 * * *", "America/New_York", on_gap=GapPolicy.SKIP),
                cron("*/20 * * * * *", "Australia/Lord_Howe"),
            ]
        ),
    ),
    st.sampled_from(MisfireKind),
    st.integers(0, 5),
)


@settings(max_examples=60, deadline=None)
@given(
    specs,
    st.lists(st.integers(1, 600), min_size=1, max_size=8),
    st.integers(0, 300),
    st.integers(5, 40),
    st.sampled_from(["2026-03-08T05:00:00Z", "2026-11-01T04:00:00Z", "2026-10-03T15:00:00Z"]),
)
def test_property_repeated_plans_cover_each_nominal_once(
    spec: JobSpec, steps: list[int], horizon: int, limit: int, created: str
) -> None:
    created_at, rng = utc(created), random.Random(0)
    now, cursor, seen = created_at, None, []
    for step in steps:
        while True:
            result = plan_fires(
                spec,
                created_at=created_at,
                cursor=cursor,
                now=now,
                horizon_seconds=horizon,
                rng=rng,
                limit=limit,
            )
            seen += [f.nominal for f in result.fires]
            assert result.cursor == (result.fires[-1].nominal if result.fires else cursor)
            cursor = result.cursor
            if result.next_wake != now:  # a cut plan asks to be called again at once
                break
        now += timedelta(seconds=step)
    # Steps stay inside the one-hour catch-up window, so nothing is collapsed: every nominal appears.
    expected = []
    for occ in occurrences(spec.schedule, created_at - timedelta(microseconds=1), created_at=created_at):
        if cursor is None or occ.at > cursor:
            break
        expected.append(occ.at)
    assert seen == expected


@settings(max_examples=60, deadline=None)
@given(specs, st.integers(0, 300), st.integers(0, 4000),
       st.sampled_from(["2026-03-08T05:00:00Z", "2026-11-01T04:00:00Z", "2026-10-03T15:00:00Z"]))
def test_property_standby_wake_is_exactly_when_the_plan_has_work(
        spec: JobSpec, horizon: int, elapsed: int, created: str) -> None:
    # Given a job planned once, its cursor as a standby sees it in the cursors watch
    created_at, rng = utc(created), random.Random(0)
    first = plan_fires(spec, created_at=created_at, cursor=None, now=created_at + timedelta(seconds=elapsed),
                       horizon_seconds=horizon, rng=rng)
    wake = next_wake(spec, created_at=created_at, cursor=first.cursor, horizon_seconds=horizon)
    # Then the standby wakes the job when the holder's plan would, and planning then records something,
    # while planning just before records nothing
    if not first.done and first.next_wake is not None and first.next_wake > created_at + timedelta(seconds=elapsed):
        assert wake == first.next_wake
    if wake is not None:
        tick = timedelta(milliseconds=1)
        before = plan_fires(spec, created_at=created_at, cursor=first.cursor, now=max(wake - tick, created_at),
                            horizon_seconds=horizon, rng=rng)
        at_wake = plan_fires(spec, created_at=created_at, cursor=first.cursor, now=max(wake, created_at),
                             horizon_seconds=horizon, rng=rng)
        assert at_wake.fires
        assert not before.fires or wake - tick < created_at

"""Trigger plans: staging ahead, misfire and catch-up, pause, limits."""

from __future__ import annotations

import random
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec
import pytest

from jetcron.core.models import GapPolicy, JobSpec, MisfireKind, MisfirePolicy, Schedule, ScheduleKind
from jetcron.core.timing.triggers import FirePlan, plan_fires

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


# -- misfire: an every-minute job whose trigger was down from 00:00 until 00:10:30 -------------

DOWN = "2026-01-01T00:10:30Z"


def missed(minute: int, why: str) -> tuple[str, str, str]:
    nominal = f"2026-01-01T00:{minute:02d}:00Z"
    return nominal, nominal, f"misfire: missed by {630 - minute * 60}s ({why})"


def late(minute: int) -> tuple[str, str, None]:
    return f"2026-01-01T00:{minute:02d}:00Z", "2026-01-01T00:10:30Z", None


LATEST = "policy latest: a later missed occurrence runs"
MISFIRE_CASES = [
    pytest.param(
        MisfirePolicy(kind=MisfireKind.SKIP),
        [missed(m, "policy skip") for m in range(1, 11)],
        id="skip_records_every_missed",
    ),
    pytest.param(
        MisfirePolicy(kind=MisfireKind.LATEST),
        [missed(m, LATEST) for m in range(1, 10)] + [late(10)],
        id="latest_runs_only_the_last",
    ),
    pytest.param(
        MisfirePolicy(kind=MisfireKind.ALL, max_catchup=3),
        [missed(m, "policy all: beyond max_catchup=3") for m in range(1, 8)] + [late(8), late(9), late(10)],
        id="all_capped_by_max_catchup",
    ),
    pytest.param(
        MisfirePolicy(kind=MisfireKind.ALL, max_catchup=10),
        [late(m) for m in range(1, 11)],
        id="all_replays_each",
    ),
    pytest.param(
        MisfirePolicy(kind=MisfireKind.ALL, max_catchup=0),
        [missed(m, "policy all: beyond max_catchup=0") for m in range(1, 11)],
        id="all_with_zero_catchup_skips",
    ),
    pytest.param(
        MisfirePolicy(kind=MisfireKind.LATEST, catchup_window_seconds=300),
        [
            (
                "2026-01-01T00:05:00Z",
                "2026-01-01T00:05:00Z",
                "misfire: 5 occurrences older than the catch-up window skipped",
            )
        ]
        + [missed(m, LATEST) for m in range(6, 10)]
        + [late(10)],
        id="window_collapses_older_into_one_record",
    ),
    pytest.param(
        MisfirePolicy(kind=MisfireKind.ALL, catchup_window_seconds=60, max_catchup=5),
        [
            (
                "2026-01-01T00:09:00Z",
                "2026-01-01T00:09:00Z",
                "misfire: 9 occurrences older than the catch-up window skipped",
            ),
            late(10),
        ],
        id="window_wins_over_max_catchup",
    ),
    pytest.param(
        MisfirePolicy(kind=MisfireKind.SKIP, grace_seconds=31),
        [missed(m, "policy skip") for m in range(1, 10)]
        + [("2026-01-01T00:10:00Z", "2026-01-01T00:10:00Z", None)],
        id="within_grace_is_on_time",
    ),
]


@pytest.mark.parametrize(("misfire", "expected"), MISFIRE_CASES)
def test_misfire(misfire: MisfirePolicy, expected: list[tuple[str, str, str | None]]) -> None:
    # Given the trigger last covered 00:00 and comes back at 00:10:30
    result = plan(job(every(60), misfire=misfire), cursor="2026-01-01T00:00:00Z", now=DOWN)
    # Then every nominal up to now is decided once, and the trigger wakes for 00:11
    assert table(result) == expected
    assert (iso(result.cursor or CREATED), result.next_wake, result.done) == (
        "2026-01-01T00:10:00Z",
        utc("2026-01-01T00:11:00Z"),
        False,
    )


ONE_OFF_CASES = [
    pytest.param(
        ScheduleKind.AT,
        MisfireKind.SKIP,
        "2026-01-01T11:30:00Z",
        [("2026-01-01T11:30:00Z", "2026-01-01T11:30:00Z", "misfire: missed by 1800s (policy skip)")],
        id="at_missed_policy_skip",
    ),
    pytest.param(
        ScheduleKind.AT,
        MisfireKind.LATEST,
        "2026-01-01T11:30:00Z",
        [("2026-01-01T11:30:00Z", "2026-01-01T12:00:00Z", None)],
        id="at_missed_policy_latest_runs_late",
    ),
    pytest.param(
        ScheduleKind.AT,
        MisfireKind.ALL,
        "2026-01-01T11:30:00Z",
        [("2026-01-01T11:30:00Z", "2026-01-01T12:00:00Z", None)],
        id="at_missed_policy_all_runs_late",
    ),
    pytest.param(
        ScheduleKind.AT,
        MisfireKind.LATEST,
        "2025-06-01T00:00:00Z",
        [
            (
                "2025-06-01T00:00:00Z",
                "2025-06-01T00:00:00Z",
                "misfire: outside catch-up window (missed by 18532800s)",
            )
        ],
        id="at_far_past_outside_window",
    ),
    pytest.param(ScheduleKind.AT, MisfireKind.SKIP, "2026-01-01T12:30:00Z", [], id="at_in_future_not_staged"),
    pytest.param(
        ScheduleKind.NOW,
        MisfireKind.SKIP,
        None,
        [("2026-01-01T00:00:00Z", "2026-01-01T12:00:00Z", None)],
        id="now_always_runs_even_late",
    ),
]


@pytest.mark.parametrize(("kind", "policy", "at", "expected"), ONE_OFF_CASES)
def test_one_off_misfire(
    kind: ScheduleKind, policy: MisfireKind, at: str | None, expected: list[tuple[str, str, str | None]]
) -> None:
    schedule = Schedule(kind=kind, at=utc(at) if at else None)
    result = plan(job(schedule, misfire=MisfirePolicy(kind=policy)), cursor=None, now="2026-01-01T12:00:00Z")
    assert table(result) == expected
    assert result.done is bool(expected)
    assert result.next_wake == (None if expected else utc("2026-01-01T12:30:00Z"))


def test_one_off_done_once_covered() -> None:
    spec = job(Schedule(kind=ScheduleKind.AT, at=utc("2026-01-02T00:00:00Z")))
    first = plan(spec, cursor=None, now="2026-01-01T23:59:00Z", horizon=120)
    again = plan(spec, cursor=iso(first.cursor or CREATED), now="2026-01-02T00:05:00Z")
    assert table(first) == [("2026-01-02T00:00:00Z", "2026-01-02T00:00:00Z", None)]
    assert (first.done, first.next_wake) == (True, None)
    assert (again.fires, again.cursor, again.done, again.next_wake) == ([], first.cursor, True, None)


def test_stage_ahead_within_horizon() -> None:
    # Given an hourly job at 10:59 with a two-minute horizon, then 11:00 is recorded now
    result = plan(
        job(cron("0 * * * *")), cursor="2026-01-01T10:00:00Z", now="2026-01-01T10:59:00Z", horizon=120
    )
    assert table(result) == [("2026-01-01T11:00:00Z", "2026-01-01T11:00:00Z", None)]
    assert (result.cursor, result.next_wake) == (utc("2026-01-01T11:00:00Z"), utc("2026-01-01T11:58:00Z"))


def test_nothing_due_keeps_cursor_and_sleeps() -> None:
    result = plan(
        job(cron("0 * * * *")), cursor="2026-01-01T10:00:00Z", now="2026-01-01T10:30:00Z", horizon=60
    )
    assert (result.fires, result.cursor, result.next_wake) == (
        [],
        utc("2026-01-01T10:00:00Z"),
        utc("2026-01-01T10:59:00Z"),
    )


def test_new_job_starts_at_creation() -> None:
    result = plan(job(every(30)), cursor=None, now="2026-01-01T00:00:00Z", horizon=45)
    assert [row[0] for row in table(result)] == ["2026-01-01T00:00:00Z", "2026-01-01T00:00:30Z"]


def test_dst_gap_skip_becomes_a_skipped_record() -> None:
    spec = job(cron("30 2 * * *", "America/New_York", on_gap=GapPolicy.SKIP))
    result = plan(spec, cursor="2026-03-07T08:00:00Z", now="2026-03-08T06:59:00Z", horizon=3600)
    assert table(result) == [
        (
            "2026-03-08T07:00:00Z",
            "2026-03-08T07:00:00Z",
            "dst gap: 02:30 does not exist in America/New_York on 2026-03-08",
        )
    ]


# -- pause: an every-minute job paused 00:00:30..00:04:30, planned at 00:04:31 ---------------------

PAUSED_AT, RESUMED_AT = utc("2026-01-01T00:00:30Z"), utc("2026-01-01T00:04:30Z")
WHILE_PAUSED = "paused: came due while the job was paused"


def resumed(minute: int) -> tuple[str, str, None]:
    return f"2026-01-01T00:{minute:02d}:00Z", "2026-01-01T00:04:31Z", None


def paused(minute: int, why: str) -> tuple[str, str, str]:
    nominal = f"2026-01-01T00:{minute:02d}:00Z"
    return nominal, nominal, f"{WHILE_PAUSED} ({why})"


PAUSE_CASES = [
    pytest.param(MisfireKind.SKIP, 10, [paused(m, "policy skip") for m in range(1, 5)], id="paused_skip"),
    pytest.param(MisfireKind.LATEST, 10, [paused(m, LATEST) for m in range(1, 4)] + [resumed(4)], id="paused_latest"),
    pytest.param(MisfireKind.ALL, 10, [resumed(m) for m in range(1, 5)], id="paused_all"),
    pytest.param(MisfireKind.ALL, 2,
                 [paused(m, "policy all: beyond max_catchup=2") for m in (1, 2)] + [resumed(3), resumed(4)],
                 id="paused_all_capped"),
]


@pytest.mark.parametrize(("kind", "catchup", "expected"), PAUSE_CASES)
def test_occurrences_while_paused_follow_the_misfire_policy_on_resume(
        kind: MisfireKind, catchup: int, expected: list[tuple[str, str, str | None]]) -> None:
    # Given a grace longer than the pause (grace is for a slow trigger, not for a paused job)
    spec = job(every(60), misfire=MisfirePolicy(kind=kind, max_catchup=catchup, grace_seconds=600))
    # When the resumed job is planned a second after the resume
    result = plan(spec, cursor="2026-01-01T00:00:00Z", now="2026-01-01T00:04:31Z",
                  paused_at=PAUSED_AT, resumed_at=RESUMED_AT)
    # Then every occurrence of the pause is in the plan, as the misfire policy says, none on time
    assert table(result) == expected
    assert result.cursor == utc("2026-01-01T00:04:00Z")


def test_occurrences_after_the_resume_run_on_time() -> None:
    spec = job(every(60), misfire=MisfirePolicy(kind=MisfireKind.SKIP))
    result = plan(spec, cursor="2026-01-01T00:00:00Z", now="2026-01-01T00:04:31Z", horizon=120,
                  paused_at=PAUSED_AT, resumed_at=RESUMED_AT)
    assert table(result)[-2:] == [("2026-01-01T00:05:00Z", "2026-01-01T00:05:00Z", None),
                                  ("2026-01-01T00:06:00Z", "2026-01-01T00:06:00Z", None)]


def test_missed_before_the_pause_keeps_its_misfire_reason() -> None:
    # Given occurrences the trigger missed before the pause began (paused at 00:02:30)
    spec = job(every(60), misfire=MisfirePolicy(kind=MisfireKind.SKIP, grace_seconds=0))
    result = plan(spec, cursor="2026-01-01T00:00:00Z", now="2026-01-01T00:04:30Z",
                  paused_at=utc("2026-01-01T00:02:30Z"), resumed_at=RESUMED_AT)
    # Then those say misfire, the ones inside the pause say paused
    assert [row[2] for row in table(result)] == [
        "misfire: missed by 210s (policy skip)", "misfire: missed by 150s (policy skip)",
        f"{WHILE_PAUSED} (policy skip)", f"{WHILE_PAUSED} (policy skip)"]


def test_a_later_pause_window_does_not_apply_before_it_is_resumed() -> None:
    # Given a record paused again after its last resume (paused_at > resumed_at): no window applies
    spec = job(every(60), misfire=MisfirePolicy(kind=MisfireKind.SKIP, grace_seconds=600))
    result = plan(spec, cursor="2026-01-01T00:00:00Z", now="2026-01-01T00:04:31Z",
                  paused_at=utc("2026-01-01T00:04:00Z"), resumed_at=PAUSED_AT)
    assert [row[2] for row in table(result)] == [None] * 4


def test_now_job_paused_before_it_fired_runs_on_resume() -> None:
    spec = job(Schedule(kind=ScheduleKind.NOW), misfire=MisfirePolicy(kind=MisfireKind.SKIP))
    result = plan(spec, cursor=None, now="2026-01-01T06:00:00Z", paused_at=utc("2025-12-31T23:59:59Z"),
                  resumed_at=utc("2026-01-01T06:00:00Z"))
    assert table(result) == [("2026-01-01T00:00:00Z", "2026-01-01T06:00:00Z", None)]
    assert result.done


def test_week_outage_every_second_is_arithmetic() -> None:
    # Given an every-second job down for a week, when planned, then older occurrences are one record
    spec = job(every(1), misfire=MisfirePolicy(kind=MisfireKind.LATEST))
    started = time.perf_counter()
    result = plan(spec, cursor="2026-01-01T00:00:00Z", now="2026-01-08T00:00:00Z", limit=1000)
    assert time.perf_counter() - started < 5.0
    assert table(result)[0] == (
        "2026-01-07T22:59:59Z",
        "2026-01-07T22:59:59Z",
        "misfire: 601199 occurrences older than the catch-up window skipped",
    )
    assert table(result)[1][0] == "2026-01-07T23:00:00Z"
    assert (len(result.fires), result.next_wake, iso(result.cursor or CREATED)) == (
        1000,
        utc("2026-01-08T00:00:00Z"),
        "2026-01-07T23:16:38Z",
    )


def test_week_outage_every_second_cron_is_bounded() -> None:
    spec = job(cron("* * * * * *"), misfire=MisfirePolicy(kind=MisfireKind.SKIP))
    started = time.perf_counter()
    result = plan(spec, cursor="2026-01-01T00:00:00Z", now="2026-01-08T00:00:00Z", limit=10)
    assert time.perf_counter() - started < 5.0
    assert table(result)[:2] == [
        (
            "2026-01-07T22:59:59Z",
            "2026-01-07T22:59:59Z",
            "misfire: more than 1000 occurrences older than the catch-up window skipped",
        ),
        ("2026-01-07T23:00:00Z", "2026-01-07T23:00:00Z", "misfire: missed by 3600s (policy skip)"),
    ]


def test_cron_outage_counts_older_occurrences() -> None:
    spec = job(cron("0 * * * *"), misfire=MisfirePolicy(kind=MisfireKind.LATEST, catchup_window_seconds=3600))
    result = plan(spec, cursor="2026-01-01T00:00:00Z", now="2026-01-04T00:30:00Z")
    assert table(result) == [
        (
            "2026-01-03T23:00:00Z",
            "2026-01-03T23:00:00Z",
            "misfire: 71 occurrences older than the catch-up window skipped",
        ),
        ("2026-01-04T00:00:00Z", "2026-01-04T00:30:00Z", None),
    ]
    assert result.next_wake == utc("2026-01-04T01:00:00Z")


def test_limit_cuts_a_plan_and_the_next_call_continues() -> None:
    spec = job(every(1), misfire=MisfirePolicy(kind=MisfireKind.ALL, max_catchup=1000))
    first = plan(spec, cursor="2026-01-01T00:00:00Z", now="2026-01-01T00:01:40Z", limit=30)
    second = plan(spec, cursor=iso(first.cursor or CREATED), now="2026-01-01T00:01:40Z", limit=1000)
    assert (len(first.fires), first.next_wake, first.done) == (30, utc("2026-01-01T00:01:40Z"), False)
    nominals = [f.nominal for f in first.fires + second.fires]
    assert nominals == [utc("2026-01-01T00:00:00Z") + timedelta(seconds=s) for s in range(1, 101)]


def test_limit_cut_keeps_latest_decision_stable() -> None:
    # Given latest, a cut after the 5th missed must not let the 5th run: the 10th is the latest
    spec = job(every(60), misfire=MisfirePolicy(kind=MisfireKind.LATEST))
    first = plan(spec, cursor="2026-01-01T00:00:00Z", now=DOWN, limit=5)
    rest = plan(spec, cursor=iso(first.cursor or CREATED), now=DOWN)
    assert table(first) + table(rest) == [missed(m, LATEST) for m in range(1, 10)] + [late(10)]


# -- the warm state every trigger replica keeps from the watches ---------------------------------------


def test_warm_state_shares_what_jobs_have_in_common_and_drops_paused_jobs() -> None:
    from jetcron.core.models import JobRecord, JobStatus
    from jetcron.wire.codec import decode, encode
    from jetcron.wire.messages import Cursor
    from jetcron_services.trigger.warm import Warm

    warm = Warm(16)

    def stored(name: str, **kw: Any) -> JobRecord:  # as the KV watch delivers it: freshly decoded
        return decode(encode(JobRecord(spec=job(every(60), name=name), created_at=CREATED, updated_at=CREATED,
                                       **kw)), JobRecord)

    # Given two jobs on the same schedule and policies, then they share those objects, not copies
    warm.job_changed("a", stored("a"), CREATED)
    warm.job_changed("b", stored("b"), CREATED)
    a, b = warm.jobs["a"].spec, warm.jobs["b"].spec
    assert (a.schedule is b.schedule, a.retry is b.retry, a.resources is b.resources) == (True, True, True)
    # ...every field but the name, those added since included: a field left out costs its own object in each
    # of a million jobs (bench.trigger_memory: queue, secrets and notify were 190 B per schedule)
    unshared = [f.name for f in msgspec.structs.fields(JobSpec) if getattr(a, f.name) is not getattr(b, f.name)]
    assert unshared == ["name"]
    assert warm.index.wake_of("a") == CREATED

    # When one is paused, then it leaves the index and the records
    warm.job_changed("a", stored("a", status=JobStatus.PAUSED), CREATED)
    assert "a" not in warm.jobs and warm.index.wake_of("a") is None

    # And an older cursor revision never replaces a newer one
    warm.cursor_changed("b", Cursor(job="b", last=CREATED), 5)
    warm.cursor_changed("b", Cursor(job="b", last=CREATED - timedelta(hours=1)), 4)
    assert warm.cursors["b"] == (Cursor(job="b", last=CREATED), 5)

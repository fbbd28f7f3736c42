"""How a dependent job joins its upstreams (jetcron.core.lifecycle.dag): the join a job gets, the parts of a spec that
cannot work together (refused by name, never dropped), roots on different schedules, and when a `latest` join is
ready."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from jetcron.core.errors import InvalidSpec
from jetcron.core.lifecycle.dag import check_join, join_of, not_since, roots, roots_apart
from jetcron.core.lifecycle.run_state import RunEvent, RunState
from jetcron.core.lifecycle.runs import Change, apply, new_run
from jetcron.core.models import JobSpec, JoinPolicy, Schedule, ScheduleKind

T0 = datetime(2026, 12, 5, 12, 0, tzinfo=UTC)
NOW = Schedule(kind=ScheduleKind.NOW)
HOURLY = Schedule(kind=ScheduleKind.CRON, cron="0 * * * *")
EVERY = Schedule(kind=ScheduleKind.EVERY, every_seconds=60)


def _spec(schedule: Schedule = NOW, **kw: object) -> JobSpec:
    return JobSpec(name="e", command=["true"], schedule=schedule, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize(("spec", "expected"), [
    pytest.param(_spec(depends_on=["c"]), JoinPolicy.SAME_OCCURRENCE, id="no_schedule_same_occurrence"),
    pytest.param(_spec(HOURLY, depends_on=["c"]), JoinPolicy.LATEST, id="own_schedule_latest"),
    pytest.param(_spec(depends_on=["c"], join=JoinPolicy.LATEST), JoinPolicy.LATEST, id="asked"),
])
def test_a_dependent_job_joins_on_the_latest_when_it_has_its_own_schedule(spec: JobSpec, expected: JoinPolicy) -> None:
    assert join_of(spec) is expected


@pytest.mark.parametrize(("spec", "field", "match"), [
    pytest.param(_spec(join=JoinPolicy.LATEST), "join", "applies to a job with depends_on", id="join_alone"),
    pytest.param(_spec(wait_timeout_seconds=60), "wait_timeout_seconds", "applies to a job with depends_on",
                 id="timeout_alone"),
    pytest.param(_spec(HOURLY, depends_on=["c"], join=JoinPolicy.SAME_OCCURRENCE), "schedule",
                 "has no schedule of its own: leave the schedule out, or use join: latest", id="schedule_dropped"),
    pytest.param(_spec(depends_on=["c"], wait_timeout_seconds=0), "wait_timeout_seconds", "must be > 0",
                 id="zero_timeout"),
    pytest.param(_spec(depends_on=["c"], wait_timeout_seconds=float("inf")), "wait_timeout_seconds",
                 "must be > 0", id="infinite_timeout"),
])
def test_parts_that_cannot_work_together_are_refused_by_name(spec: JobSpec, field: str, match: str) -> None:
    with pytest.raises(InvalidSpec, match=match) as refused:
        check_join(spec)
    assert refused.value.field == field


CALENDAR_REFUSED = ("a calendar skips occurrences of a job's own schedule; this job runs when its upstreams "
                    "allow: give the calendar to the job its flow starts from")


@pytest.mark.parametrize(("spec", "field", "value"), [
    pytest.param(_spec(depends_on=["c"], exclude_calendars=["holidays"]), "exclude_calendars", ["holidays"],
                 id="exclude_no_schedule"),
    pytest.param(_spec(depends_on=["c"], only_calendars=["weekdays"]), "only_calendars", ["weekdays"],
                 id="only_no_schedule"),
    # joined on the latest but without a schedule of its own: its runs still come from its upstreams' successes
    pytest.param(_spec(depends_on=["c"], join=JoinPolicy.LATEST, exclude_calendars=["holidays"]),
                 "exclude_calendars", ["holidays"], id="latest_no_schedule"),
    # refused for the calendar first: dropping the schedule alone would still leave the calendar without occurrences
    pytest.param(_spec(HOURLY, depends_on=["c"], join=JoinPolicy.SAME_OCCURRENCE, only_calendars=["weekdays"]),
                 "only_calendars", ["weekdays"], id="same_occurrence_with_schedule"),
    pytest.param(_spec(depends_on=["c"], exclude_calendars=["holidays"], only_calendars=["weekdays"]),
                 "exclude_calendars", ["holidays"], id="both_names_exclude"),
])
def test_a_calendar_on_a_job_that_runs_when_its_upstreams_allow_is_refused_by_name(
        spec: JobSpec, field: str, value: list[str]) -> None:
    with pytest.raises(InvalidSpec) as refused:
        check_join(spec)
    assert (refused.value.field, refused.value.value, refused.value.problem) == (field, value, CALENDAR_REFUSED)
    assert str(refused.value) == f"{field}: {CALENDAR_REFUSED} (got {value!r})"


def test_parts_that_work_together_pass() -> None:
    check_join(_spec(HOURLY, depends_on=["c"], wait_timeout_seconds=3600))  # the design's body: schedule + deps
    # a calendar skips occurrences of the job's own schedule, on which a latest join fires
    check_join(_spec(HOURLY, depends_on=["c"], exclude_calendars=["holidays"], only_calendars=["weekdays"]))
    check_join(_spec(HOURLY, exclude_calendars=["holidays"]))
    check_join(_spec(depends_on=["c"], join=JoinPolicy.SAME_OCCURRENCE))
    check_join(_spec())


GRAPH = {"a": [], "b": [], "c": ["a"], "d": ["b"], "e": ["c", "d"], "f": ["c"]}


def test_roots_are_the_upstream_jobs_without_upstreams() -> None:
    assert roots(GRAPH, "e") == ["a", "b"]
    assert roots(GRAPH, "f") == ["a"]
    assert roots(GRAPH, "a") == ["a"]


def test_roots_on_different_schedules_are_named_and_on_one_schedule_are_not() -> None:
    assert roots_apart(GRAPH, "e", {"a": EVERY, "b": HOURLY}) == ["a", "b"]
    assert roots_apart(GRAPH, "e", {"a": EVERY, "b": EVERY}) is None  # their occurrences coincide
    assert roots_apart(GRAPH, "f", {"a": EVERY}) is None


@pytest.mark.parametrize(("succeeded", "since", "pending"), [
    pytest.param({"c": T0, "d": T0}, None, [], id="never_ran_any_success_counts"),
    pytest.param({"c": T0, "d": None}, None, ["d"], id="one_never_succeeded"),
    pytest.param({"c": T0 + timedelta(minutes=5), "d": T0 - timedelta(minutes=5)}, T0, ["d"], id="one_is_stale"),
    pytest.param({"c": T0 + timedelta(minutes=5), "d": T0 + timedelta(seconds=1)}, T0, [], id="both_since"),
    pytest.param({"c": T0, "d": T0 + timedelta(minutes=1)}, T0, ["c"], id="a_success_at_that_instant_was_taken"),
])
def test_a_latest_join_waits_for_a_success_of_each_upstream_since_it_last_ran(
        succeeded: dict[str, datetime | None], since: datetime | None, pending: list[str]) -> None:
    assert not_since(["c", "d"], succeeded, since) == pending


def test_a_released_run_says_when_it_took_its_upstreams_successes() -> None:
    waiting = new_run(_spec(HOURLY, depends_on=["c"]), run_id="e.20261205T120000000Z", state=RunState.WAITING,
                      scheduled_at=T0, due_at=T0, now=T0, reason="waiting on upstream jobs: c")
    released = apply(waiting, Change(event=RunEvent.RELEASE), T0 + timedelta(minutes=7))
    assert released.state is RunState.SCHEDULED and released.released_at == T0 + timedelta(minutes=7)

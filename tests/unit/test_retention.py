"""History retention as pure decisions (jetcron.core.lifecycle.retention): what a run is stamped with, the TTL each
write of its record, events and output carries, what count limits and storage pressure may let go, and a job's end."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import msgspec
import pytest

from jetcron.core.errors import InvalidSpec
from jetcron.core.lifecycle.retention import (
    ClusterHistory,
    Ended,
    fires_by_mark,
    gate_seconds,
    job_ttl,
    keep_seconds,
    may_shed,
    one_shot,
    over_count,
    record_ttl,
    resolve,
    settled,
    stream_ttl,
    to_free,
    validate_history,
)
from jetcron.core.models import HistoryPolicy, JobRecord, JobSpec, MisfirePolicy, Run, RunState, Schedule, ScheduleKind

T0 = datetime(2026, 12, 5, 12, 0, tzinfo=UTC)
CLUSTER = ClusterHistory(keep_seconds=3 * 86400, min_seconds=3600, max_seconds=90 * 86400, keep_succeeded=None,
                         keep_failed=None, dead_letter_seconds=30 * 86400)
DAY = 86400.0


def _spec(history: HistoryPolicy | None = None, catchup: float = 3600, grace: float = 5,
          kind: ScheduleKind = ScheduleKind.EVERY) -> JobSpec:
    schedule = Schedule(kind=kind, every_seconds=60 if kind is ScheduleKind.EVERY else None)
    return JobSpec(name="j", command=["true"], schedule=schedule, history=history,
                   misfire=MisfirePolicy(catchup_window_seconds=catchup, grace_seconds=grace))


def _run(state: RunState, *, finished: datetime | None = T0, keep: float | None = None,
         spec: JobSpec | None = None, run_id: str = "j.20261205T120000000Z") -> Run:
    return Run(run_id=run_id, job="j", state=state, scheduled_at=T0, due_at=T0, created_at=T0, finished_at=finished,
               keep_seconds=keep, spec=spec if spec is not None else _spec())


@pytest.mark.parametrize(("job", "tenant", "expected"), [
    pytest.param(None, None, HistoryPolicy(keep_seconds=3 * DAY), id="cluster_default"),
    pytest.param(None, HistoryPolicy(keep_seconds=DAY, keep_failed=2),
                 HistoryPolicy(keep_seconds=DAY, keep_failed=2), id="tenant_over_cluster"),
    pytest.param(HistoryPolicy(keep_succeeded=3), HistoryPolicy(keep_seconds=DAY, keep_succeeded=9),
                 HistoryPolicy(keep_seconds=DAY, keep_succeeded=3), id="job_over_tenant_field_by_field"),
    pytest.param(HistoryPolicy(keep_seconds=7 * DAY), HistoryPolicy(keep_seconds=DAY),
                 HistoryPolicy(keep_seconds=7 * DAY), id="job_keep_wins"),
])
def test_a_policy_is_resolved_field_by_field_job_then_tenant_then_cluster(
        job: HistoryPolicy | None, tenant: HistoryPolicy | None, expected: HistoryPolicy) -> None:
    assert resolve(job, tenant, CLUSTER) == expected


@pytest.mark.parametrize(("spec", "tenant", "expected"), [
    pytest.param(_spec(), None, 3 * DAY, id="cluster"),
    pytest.param(_spec(HistoryPolicy(keep_seconds=2 * 3600)), None, 2 * 3600, id="the_jobs_own"),
    pytest.param(_spec(), HistoryPolicy(keep_seconds=5 * DAY), 5 * DAY, id="the_tenants"),
    pytest.param(_spec(HistoryPolicy(keep_seconds=3600), catchup=6 * 3600), None, 6 * 3600 + 5,
                 id="never_below_the_fire_gate"),
    pytest.param(_spec(HistoryPolicy(keep_seconds=200 * DAY)), None, 90 * DAY, id="never_above_the_ceiling"),
])
def test_a_new_run_is_stamped_with_its_retention_within_the_clusters_bounds(
        spec: JobSpec, tenant: HistoryPolicy | None, expected: float) -> None:
    assert keep_seconds(spec, tenant, CLUSTER) == expected


def test_the_gate_is_the_floor_or_the_catchup_window_with_its_grace() -> None:
    assert gate_seconds(None, CLUSTER) == 3600  # a skipped run keeps no snapshot
    assert gate_seconds(_spec(catchup=60, grace=5), CLUSTER) == 3600
    assert gate_seconds(_spec(catchup=7200, grace=30), CLUSTER) == 7230


@pytest.mark.parametrize("state", [s for s in RunState if not s.terminal], ids=str)
def test_a_run_that_has_not_ended_has_no_ttl(state: RunState) -> None:
    assert record_ttl(_run(state, finished=None), T0 + timedelta(days=400), CLUSTER) is None


@pytest.mark.parametrize(("run", "now", "expected"), [
    pytest.param(_run(RunState.SUCCEEDED, keep=DAY), T0, 86400, id="its_keep_from_its_end"),
    pytest.param(_run(RunState.SUCCEEDED, keep=DAY), T0 + timedelta(hours=6), 18 * 3600, id="less_what_has_passed"),
    pytest.param(_run(RunState.SUCCEEDED, keep=None), T0, 3 * 86400, id="unstamped_takes_the_clusters"),
    pytest.param(_run(RunState.SUCCEEDED, keep=DAY), T0 + timedelta(days=2), 3600,
                 id="a_late_write_lives_at_least_the_floor"),
    pytest.param(_run(RunState.DEAD, keep=DAY), T0, 30 * 86400, id="dead_as_long_as_its_dead_letter"),
    pytest.param(_run(RunState.SKIPPED, keep=DAY, finished=T0 - timedelta(seconds=0.5)), T0, 86400,
                 id="whole_seconds_rounded_up"),
])
def test_an_ended_runs_record_lives_its_retention_from_its_end(run: Run, now: datetime, expected: int) -> None:
    assert record_ttl(run, now, CLUSTER) == expected


def test_events_and_output_live_the_runs_retention_within_the_bounds() -> None:
    assert stream_ttl(DAY, CLUSTER) == 86400
    assert stream_ttl(None, CLUSTER) == 3 * 86400
    assert stream_ttl(60, CLUSTER) == 3600  # the tracker must get to consume an event
    assert stream_ttl(365 * DAY, CLUSTER) == 90 * 86400  # the streams' max_age


def _ended(run_id: str, state: RunState, ago: float, gate: float = 3600) -> Ended:
    return Ended(run_id=run_id, state=state, finished_at=T0 - timedelta(seconds=ago), gate_seconds=gate)


def test_count_limits_let_go_the_oldest_beyond_the_newest_n_of_each_kind() -> None:
    runs = [_ended(f"j.{i:02d}", RunState.SUCCEEDED, 7200) for i in range(5)]
    runs += [_ended("j.f1", RunState.FAILED, 7200), _ended("j.f2", RunState.DEAD, 7200),
             _ended("j.f3", RunState.BLOCKED, 7200), _ended("j.c1", RunState.CANCELLED, 7200)]
    let_go = over_count(runs, HistoryPolicy(keep_succeeded=2, keep_failed=1), T0)
    assert let_go == ["j.00", "j.01", "j.02", "j.f1", "j.f2"]  # cancelled is counted by neither


def test_count_limits_never_let_go_a_run_inside_its_gate() -> None:
    runs = [_ended("j.1", RunState.SUCCEEDED, 60), _ended("j.2", RunState.SUCCEEDED, 60),
            _ended("j.3", RunState.SUCCEEDED, 60)]
    assert over_count(runs, HistoryPolicy(keep_succeeded=1), T0) == []
    assert over_count(runs, HistoryPolicy(keep_succeeded=1), T0 + timedelta(hours=1)) == ["j.1", "j.2"]


def test_no_count_limit_lets_nothing_go() -> None:
    assert over_count([_ended("j.1", RunState.SUCCEEDED, 1e6)], HistoryPolicy(), T0) == []


@pytest.mark.parametrize(("run", "now", "expected"), [
    pytest.param(_run(RunState.RUNNING, finished=None), T0 + timedelta(days=9), False, id="live_never"),
    pytest.param(_run(RunState.SUCCEEDED), T0 + timedelta(seconds=3604), False, id="inside_its_gate"),
    pytest.param(_run(RunState.SUCCEEDED), T0 + timedelta(seconds=3605), True, id="past_its_gate"),
    pytest.param(_run(RunState.DEAD), T0 + timedelta(days=9), False, id="dead_stays_for_its_dead_letter"),
])
def test_storage_pressure_may_let_go_only_ended_runs_past_their_gate(run: Run, now: datetime, expected: bool) -> None:
    assert may_shed(run, now, CLUSTER) is expected


@pytest.mark.parametrize(("used", "limit", "expected"), [
    pytest.param(89, 100, 0, id="below_the_line"),
    pytest.param(90, 100, 10, id="at_the_line_down_to_80"),
    pytest.param(100, 100, 20, id="full"),
    pytest.param(10**12, 0, 0, id="no_limit"),
])
def test_what_pressure_asks_to_free(used: int, limit: int, expected: int) -> None:
    assert to_free(used, limit, 0.9) == expected


def test_a_job_without_an_end_is_kept_and_an_ended_one_lives_until_its_end() -> None:
    record = JobRecord(spec=_spec(kind=ScheduleKind.NOW), created_at=T0, updated_at=T0)
    assert job_ttl(record, T0) is None
    ended = msgspec.structs.replace(record, expires_at=T0 + timedelta(hours=2))
    assert job_ttl(ended, T0) == 7200
    assert job_ttl(ended, T0 + timedelta(hours=3)) == 1  # overdue: gone at once, never kept


def test_only_now_and_at_jobs_are_one_shot() -> None:
    assert one_shot(_spec(kind=ScheduleKind.NOW)) and one_shot(_spec(kind=ScheduleKind.AT))
    assert not one_shot(_spec(kind=ScheduleKind.EVERY))


def test_only_a_now_job_the_trigger_fires_itself_is_made_with_its_end() -> None:
    assert fires_by_mark(_spec(kind=ScheduleKind.NOW))
    assert not fires_by_mark(msgspec.structs.replace(_spec(kind=ScheduleKind.NOW), depends_on=["up"]))
    assert not fires_by_mark(_spec(kind=ScheduleKind.AT)) and not fires_by_mark(_spec(kind=ScheduleKind.EVERY))


def test_a_job_made_with_its_end_is_settled_ended_if_it_fired_and_unended_if_not() -> None:
    ends = T0 + timedelta(days=3)
    made = JobRecord(spec=_spec(kind=ScheduleKind.NOW), created_at=T0, updated_at=T0, expires_at=ends,
                     fired_by_mark=True)
    fired = settled(made, fired=True)
    assert (fired.fired_by_mark, fired.expires_at) == (False, ends)
    unfired = settled(made, fired=False)
    assert (unfired.fired_by_mark, unfired.expires_at) == (False, None)
    ordinary = msgspec.structs.replace(made, fired_by_mark=False)
    assert settled(ordinary, fired=False) is ordinary  # its own end says whether it fired


@pytest.mark.parametrize(("policy", "field", "match"), [
    pytest.param(HistoryPolicy(keep_seconds=60), "history.keep_seconds", "floor 3600 s", id="below_the_floor"),
    pytest.param(HistoryPolicy(keep_seconds=91 * DAY), "history.keep_seconds", "ceiling 7776000 s",
                 id="above_the_ceiling"),
    pytest.param(HistoryPolicy(keep_seconds=float("nan")), "history.keep_seconds", "positive", id="nan"),
    pytest.param(HistoryPolicy(keep_seconds=-1), "history.keep_seconds", "positive", id="negative"),
    pytest.param(HistoryPolicy(keep_succeeded=-1), "history.keep_succeeded", "whole number", id="negative_count"),
    pytest.param(HistoryPolicy(keep_failed=10**7), "history.keep_failed", "whole number", id="huge_count"),
])
def test_a_policy_outside_the_clusters_bounds_is_refused_naming_field_and_value(
        policy: HistoryPolicy, field: str, match: str) -> None:
    with pytest.raises(InvalidSpec, match=match) as caught:
        validate_history(policy, CLUSTER)
    assert caught.value.field == field


def test_a_policy_inside_the_bounds_passes() -> None:
    validate_history(HistoryPolicy(keep_seconds=7 * DAY, keep_succeeded=3, keep_failed=0), CLUSTER)
    validate_history(None, CLUSTER)

"""What the dashboard computes without I/O: schedules in words, next fires, charts, the flow graph, sessions."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import msgspec
import pytest

from jetcron.core.lifecycle.finished import FinishedMinute, dense
from jetcron.core.lifecycle.run_state import RunState
from jetcron.core.models import AttemptRecord, JobRecord, JobSpec, JobStatus, Run, Schedule, ScheduleKind
from jetcron.core.timing.calendars import CalendarSpec
from jetcron_services.gateway.ui import present
from jetcron_services.gateway.ui.session import Sessions, csrf_token, safe_next

T0 = datetime(2026, 3, 28, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(("schedule", "words"), [
    (Schedule(kind=ScheduleKind.NOW), "once, when created"),
    (Schedule(kind=ScheduleKind.AT, at=T0), "once at 2026-03-28T12:00:00+00:00"),
    (Schedule(kind=ScheduleKind.EVERY, every_seconds=300), "every 5 minutes"),
    (Schedule(kind=ScheduleKind.EVERY, every_seconds=3600), "every hour"),
    (Schedule(kind=ScheduleKind.EVERY, every_seconds=90), "every 90 seconds"),
    (Schedule(kind=ScheduleKind.EVERY, every_seconds=0.5), "every 0.5 seconds"),
    (Schedule(kind=ScheduleKind.CRON, cron="0 */6 * * *"), "Every 6 hours · 0 */6 * * *"),
    (Schedule(kind=ScheduleKind.CRON, cron="30 2 * * *", tz="Europe/Berlin"),
     "At 02:30 AM (Europe/Berlin) · 30 2 * * *"),
    (Schedule(kind=ScheduleKind.CRON, cron="@daily"), "At 12:00 AM · @daily"),
    (Schedule(kind=ScheduleKind.CRON, cron="*/10 * * * * *"), "Every 10 seconds · */10 * * * * *"),
])
def test_schedules_in_words(schedule: Schedule, words: str) -> None:
    assert present.schedule_words(schedule) == words


def _job(schedule: Schedule, status: JobStatus = JobStatus.ACTIVE) -> JobRecord:
    return JobRecord(spec=JobSpec(name="j", command=["true"], schedule=schedule), status=status, created_at=T0,
                     updated_at=T0)


def test_next_fire_in_the_jobs_zone_and_utc_across_a_dst_change() -> None:
    # Berlin springs forward on 2026-03-29: 03:00 local is 01:00 UTC that day, 02:00 UTC the day before
    fire = present.next_fire(_job(Schedule(kind=ScheduleKind.CRON, cron="0 3 * * *", tz="Europe/Berlin")), T0)
    assert fire is not None
    assert fire.utc == datetime(2026, 3, 29, 1, 0, tzinfo=UTC)
    assert (fire.local.hour, fire.local.utcoffset()) == (3, timedelta(hours=2))
    paused = _job(Schedule(kind=ScheduleKind.CRON, cron="0 3 * * *"), status=JobStatus.PAUSED)
    assert present.next_fire(paused, T0) is None
    assert present.next_fire(_job(Schedule(kind=ScheduleKind.NOW)), T0) is None
    assert present.next_fire(_job(Schedule(kind=ScheduleKind.AT, at=T0 - timedelta(hours=1))), T0) is None


def _run(n: int, state: RunState, finished: datetime | None, wait: float = 0.0) -> Run:
    due = T0 - timedelta(hours=1)
    return Run(run_id=f"j.{n}", job="j", state=state, scheduled_at=due, due_at=due, created_at=due,
               started_at=due + timedelta(seconds=wait), finished_at=finished)


def test_the_chart_has_a_bar_per_minute_stacked_by_outcome_and_its_figures_as_text() -> None:
    now = T0 + timedelta(seconds=30)
    items = [FinishedMinute(minute=T0 - timedelta(minutes=1), counts={"succeeded": 4}),
             FinishedMinute(minute=T0, counts={"dead": 2, "failed": 1, "succeeded": 3, "timed_out": 1}),
             FinishedMinute(minute=T0 - timedelta(minutes=60), counts={"succeeded": 50})]  # before the hour
    minutes = dense(items, now, 60)
    assert len(minutes) == 60 and minutes[-1].minute == T0
    svg = present.stacked_bars(minutes)
    assert svg.count("<title>") == 60
    assert "12:00 UTC: 3 succeeded, 1 failed, 2 dead, 1 timed_out" in svg and "11:59 UTC: 4 succeeded" in svg
    assert "11:01 UTC: none" in svg
    # the tallest bar fills the chart; succeeded at the bottom, in the ok colour, dead in its own
    last = svg[svg.index("12:00 UTC"):]
    heights = [float(h) for h in re.findall(r'height="([0-9.]+)"', last)]
    assert sum(heights) == pytest.approx(116.0)
    assert last.index("outcome-succeeded") < last.index("outcome-failed") < last.index("outcome-dead")
    assert 'class="tone-ok outcome-succeeded"' in last and 'class="tone-bad outcome-dead"' in last
    assert present.finished_totals(minutes) == [("succeeded", 7), ("failed", 1), ("dead", 2), ("timed_out", 1)]
    assert present.finished_totals(dense([], now, 60)) == []
    assert present.stacked_bars(dense([], now, 60)).count('class="tone-none"') == 60


def test_a_calendars_users_are_its_own_tenants_jobs_that_name_it_and_where() -> None:
    def job(tenant: str, name: str, exclude: list[str], only: list[str]) -> JobRecord:
        return JobRecord(spec=JobSpec(name=name, tenant=tenant, command=["true"], exclude_calendars=exclude,
                                      only_calendars=only), created_at=T0, updated_at=T0)

    jobs = [job("acme", "report", ["holidays"], ["workdays"]), job("acme", "payroll", ["holidays"], []),
            job("acme", "plain", [], []), job("globex", "theirs", ["holidays"], []),
            job("acme", "both", ["holidays"], ["holidays"])]
    uses = present.calendar_uses(CalendarSpec(name="holidays", tenant="acme"), jobs)
    assert [(record.spec.name, where) for record, where in uses] == [
        ("both", ["exclude", "only"]), ("payroll", ["exclude"]), ("report", ["exclude"])]
    assert [r.spec.name for r, _ in present.calendar_uses(CalendarSpec(name="holidays", tenant="globex"), jobs)] \
        == ["theirs"]


def test_wait_and_percentiles() -> None:
    assert present.wait_seconds(_run(1, RunState.RUNNING, None, wait=2.5)) == 2.5
    assert present.percentile([], 99) is None
    assert present.percentile([float(i) for i in range(1, 101)], 99) == 99.0
    assert present.percentile([3.0, 1.0, 2.0], 50) == 2.0
    assert [present.duration(s) for s in (None, 1.25, 75, 3725)] == ["", "1.2 s", "1 min 15 s", "1 h 2 min"]


def test_a_flow_is_laid_out_by_its_longest_upstream_chain() -> None:
    graph = {"report": ["load", "extract"], "load": ["extract"], "extract": [], "audit": ["extract"]}
    nodes = {n.name: (n.layer, n.row) for n in present.layers(graph)}
    assert nodes == {"extract": (0, 0), "audit": (1, 0), "load": (1, 1), "report": (2, 0)}
    svg = present.dag_svg(graph, {"extract": "succeeded", "load": "blocked"}, {"load": "/ui/runs/x"})
    assert svg.count('class="edge"') == 4 and '<a href="/ui/runs/x">' in svg
    assert "tone-ok" in svg and "tone-warn" in svg and "not run" in svg


def test_a_long_chain_does_not_exhaust_the_recursion_limit() -> None:
    graph = {f"j{i}": [f"j{i - 1}"] if i else [] for i in range(5000)}
    assert max(n.layer for n in present.layers(graph)) == 4999


def test_names_are_escaped_in_svg() -> None:
    svg = present.dag_svg({"<script>": []}, {"<script>": "<b>"}, {})
    assert "<script>" not in svg and "&lt;script&gt;" in svg
    bars = present.hbars([("<cpu>", 1, 2)])
    assert "&lt;cpu&gt;" in bars


def test_next_after_login_stays_on_the_dashboard() -> None:
    assert safe_next("/ui/jobs?q=x") == "/ui/jobs?q=x"
    for elsewhere in ("https://evil.example/", "//evil.example/ui", "/api/v1/jobs", "/ui\\@evil", None, "",
                      "/uix"):
        assert safe_next(elsewhere) == "/ui", elsewhere


def test_the_csrf_token_is_tied_to_the_session_and_the_key() -> None:
    keyed, other_key = Sessions(key=b"k" * 32), Sessions(key=b"j" * 32)
    a, b = csrf_token(keyed, "v1.a.1.sig"), csrf_token(keyed, "v1.b.1.sig")
    assert a == csrf_token(keyed, "v1.a.1.sig") and a != b and len(a) == 64 and "sig" not in a
    assert csrf_token(other_key, "v1.a.1.sig") != a


def test_attempts_on_a_timeline() -> None:
    due = T0
    first = AttemptRecord(attempt=1, agent="a1", token=7, outcome="timed_out", started_at=due,
                          finished_at=due + timedelta(seconds=10))
    run = Run(run_id="j.1", job="j", state=RunState.RUNNING, attempt=2, scheduled_at=due, due_at=due,
              created_at=due, agent="a2", token=9, started_at=due + timedelta(seconds=20), history=[first])
    svg = present.timeline(run, due + timedelta(seconds=40))
    assert svg.count("<rect") == 2
    assert "attempt 1 on a1 (token 7): timed_out, from 12:00:00 to 12:00:10 UTC" in svg
    assert "attempt 2 on a2 (token 9): running since 12:00:20 UTC" in svg
    assert 'class="tone-bad"' in svg and 'class="tone-active"' in svg
    # bars in proportion: the first 10 s of 40, the second 20 s from 20 s in
    widths = [float(w) for w in re.findall(r'width="([0-9.]+)" height="14"', svg)]
    assert widths[1] == pytest.approx(2 * widths[0], rel=0.01)
    assert present.timeline(msgspec.structs.replace(run, started_at=None, history=[]), T0) == ""


def test_a_first_attempt_still_running_has_its_bar() -> None:
    run = Run(run_id="j.1", job="j", state=RunState.RUNNING, scheduled_at=T0, due_at=T0, created_at=T0,
              agent="a1", token=3, started_at=T0 + timedelta(seconds=1))
    svg = present.timeline(run, T0 + timedelta(seconds=5))
    assert "attempt 1 on a1 (token 3): running since 12:00:01 UTC" in svg

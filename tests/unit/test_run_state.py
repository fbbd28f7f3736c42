"""The run state machine: every legal edge lands where the table says, every other edge is refused."""

from __future__ import annotations

import itertools
import random
from datetime import UTC, datetime, timedelta

import msgspec
import pytest

from jetcron.core.errors import IllegalTransition, StaleReport
from jetcron.core.lifecycle import retry
from jetcron.core.lifecycle.retry import RetryAction, RetryDecision
from jetcron.core.lifecycle.run_state import TERMINAL, TRANSITIONS, RunEvent, RunState
from jetcron.core.lifecycle.runs import Change, apply
from jetcron.core.models import AttemptRecord, JobSpec, RetryPolicy, Run

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
RETRY_LATER = RetryDecision(action=RetryAction.RETRY, delay_seconds=5.0, reason="retry in 5s")
RETRY_NOW = RetryDecision(action=RetryAction.RETRY, delay_seconds=0.0, reason="re-dispatched")
DEAD = RetryDecision(action=RetryAction.DEAD, reason="3/3 attempts failed")


def make_run(state: RunState, **kw: object) -> Run:
    base = dict(
        run_id="job.20261130T120000000Z",
        job="job",
        state=state,
        attempt=1,
        scheduled_at=NOW,
        due_at=NOW,
        created_at=NOW,
        spec=JobSpec(name="job", command=["true"]),
        agent="a1",
        agents=["a1"],
        token=7,
    )
    base.update(kw)
    return Run(**base)  # type: ignore[arg-type]


def change_for(event: RunEvent, run: Run, retry_decision: RetryDecision = RETRY_LATER) -> Change:
    return Change(
        event=event,
        attempt=run.attempt,
        token=run.token,
        agent="a1",
        agents=["a1"],
        exit_code=1,
        reason="because",
        retry=retry_decision,
    )


LEGAL = sorted(TRANSITIONS, key=lambda k: (k[0].value, k[1].value))
ILLEGAL = [(s, e) for s, e in itertools.product(RunState, RunEvent) if (s, e) not in TRANSITIONS]


@pytest.mark.parametrize(("state", "event"), LEGAL, ids=[f"{s}-{e}" for s, e in LEGAL])
def test_every_legal_edge_lands_in_the_table(state: RunState, event: RunEvent) -> None:
    run = make_run(state)
    new = apply(run, change_for(event, run), NOW)
    assert new.state in TRANSITIONS[(state, event)]
    assert run.state is state, "apply must not mutate its input"


@pytest.mark.parametrize(("state", "event"), ILLEGAL, ids=[f"{s}-{e}" for s, e in ILLEGAL])
def test_every_illegal_edge_is_refused_with_a_named_error(state: RunState, event: RunEvent) -> None:
    run = make_run(state)
    with pytest.raises(
        IllegalTransition, match=rf"run job\.20261130T120000000Z: illegal transition {state} -> {event}"
    ):
        apply(run, change_for(event, run), NOW)


def test_terminal_states_have_no_way_out() -> None:
    assert not [k for k in TRANSITIONS if k[0] in TERMINAL]
    assert all(s.terminal for s in TERMINAL)


@pytest.mark.parametrize(
    ("event", "decision", "expected"),
    [
        pytest.param(RunEvent.FAIL, RETRY_LATER, RunState.RETRY_WAIT, id="fail_with_backoff_waits"),
        pytest.param(RunEvent.FAIL, RETRY_NOW, RunState.SCHEDULED, id="fail_without_delay_requeues"),
        pytest.param(RunEvent.FAIL, DEAD, RunState.DEAD, id="fail_exhausted_is_dead"),
        pytest.param(
            RunEvent.FAIL,
            RetryDecision(action=RetryAction.FAIL, reason="non-retryable"),
            RunState.FAILED,
            id="fail_non_retryable_is_failed",
        ),
        pytest.param(RunEvent.LOSE, RETRY_NOW, RunState.SCHEDULED, id="lost_requeues_as_new_attempt"),
        pytest.param(RunEvent.LOSE, DEAD, RunState.DEAD, id="lost_exhausted_is_dead"),
    ],
)
def test_failure_targets_follow_the_retry_decision(
    event: RunEvent, decision: RetryDecision, expected: RunState
) -> None:
    run = make_run(RunState.RUNNING)
    new = apply(run, change_for(event, run, decision), NOW)
    assert new.state is expected
    assert new.history[-1].attempt == 1
    if expected is RunState.SCHEDULED:
        assert (new.attempt, new.agent, new.token) == (2, None, 0)
    if expected is RunState.RETRY_WAIT:
        assert new.due_at == NOW + timedelta(seconds=5)


def test_a_report_from_an_older_attempt_is_stale() -> None:
    run = make_run(RunState.RUNNING, attempt=2, token=9)
    with pytest.raises(StaleReport, match="report for attempt 1, run is at attempt 2"):
        apply(run, Change(event=RunEvent.SUCCEED, attempt=1, token=7), NOW)


def test_a_report_with_an_older_token_is_stale() -> None:
    run = make_run(RunState.RUNNING, token=9)
    with pytest.raises(StaleReport, match="report with token 7, run holds token 9"):
        apply(run, Change(event=RunEvent.SUCCEED, attempt=1, token=7), NOW)


def test_a_start_from_an_agent_that_was_not_assigned_is_stale() -> None:
    run = make_run(RunState.ASSIGNED, agents=["a1"], token=0)
    with pytest.raises(StaleReport, match="agent a9 was not assigned this run"):
        apply(run, Change(event=RunEvent.START, attempt=1, token=3, agent="a9"), NOW)


def test_a_late_success_cannot_overwrite_cancelled() -> None:
    run = apply(make_run(RunState.RUNNING), Change(event=RunEvent.CANCEL, reason="user"), NOW)
    assert run.state is RunState.CANCELLED
    with pytest.raises(IllegalTransition):
        apply(run, Change(event=RunEvent.SUCCEED, attempt=1, token=7), NOW)


def test_start_records_the_fencing_token() -> None:
    run = make_run(RunState.ASSIGNED, token=0)
    new = apply(run, Change(event=RunEvent.START, attempt=1, token=42, agent="a1"), NOW)
    assert (new.state, new.token, new.started_at) == (RunState.RUNNING, 42, NOW)


def _with_failures(n: int, max_attempts: int = 3, codes: list[int] | None = None) -> Run:
    spec = JobSpec(
        name="job",
        command=["x"],
        retry=RetryPolicy(
            max_attempts=max_attempts,
            initial_seconds=2,
            multiplier=3,
            max_delay_seconds=10,
            jitter=0,
            non_retryable_exit_codes=codes or [],
        ),
    )
    history = [AttemptRecord(attempt=i + 1, outcome="failed") for i in range(n)]
    return msgspec.structs.replace(make_run(RunState.RUNNING, attempt=n + 1), spec=spec, history=history)


@pytest.mark.parametrize(
    ("failures", "outcome", "code", "action", "delay"),
    [
        pytest.param(0, "failed", 1, RetryAction.RETRY, 2.0, id="first_failure_waits_initial"),
        pytest.param(1, "failed", 1, RetryAction.RETRY, 6.0, id="second_failure_multiplies"),
        pytest.param(2, "failed", 1, RetryAction.DEAD, 0.0, id="third_failure_exhausts"),
        pytest.param(0, "lost", None, RetryAction.RETRY, 0.0, id="lost_redispatches_at_once"),
        pytest.param(0, "failed", 3, RetryAction.FAIL, 0.0, id="non_retryable_code_fails"),
        pytest.param(0, "timed_out", None, RetryAction.RETRY, 2.0, id="timeout_is_retried"),
    ],
)
def test_retry_decisions(failures: int, outcome: str, code: int | None, action: RetryAction, delay: float) -> None:
    decision = retry.decide(_with_failures(failures, codes=[3]), outcome, code, random.Random(1))
    assert decision.action is action
    assert decision.delay_seconds == pytest.approx(delay)


def test_backoff_is_capped_and_jitter_only_adds() -> None:
    policy = RetryPolicy(initial_seconds=1, multiplier=10, max_delay_seconds=30, jitter=0.5)
    delays = [retry.backoff_delay(policy, 5, random.Random(seed)) for seed in range(50)]
    assert all(30 <= d <= 45 for d in delays)


def test_hand_back_spends_no_attempt_from_the_budget() -> None:
    run = make_run(RunState.RUNNING)
    new = apply(run, Change(event=RunEvent.HAND_BACK, attempt=1, token=7), NOW)
    assert new.attempt == 2 and new.history[-1].outcome == "handed_back"
    assert retry.failures_so_far(new) == 0


@pytest.mark.parametrize(("event", "outcome"), [
    pytest.param(RunEvent.HAND_BACK, "handed_back", id="staged_handed_back_keeps_its_due_time"),
    pytest.param(RunEvent.LOSE, "not_started", id="staged_assignment_lost_keeps_its_due_time"),
])
def test_a_staged_attempt_given_up_before_its_due_time_is_not_redone_early(event: RunEvent, outcome: str) -> None:
    # A herd run assigned minutes ahead, then given back (draining agent) or lost (dead agent) before its time
    due = NOW + timedelta(minutes=5)
    run = make_run(RunState.ASSIGNED, scheduled_at=due, due_at=due)
    new = apply(run, Change(event=event, attempt=1, token=7, retry=RETRY_NOW), NOW)
    assert (new.state, new.attempt, new.due_at, new.history[-1].outcome) == (RunState.SCHEDULED, 2, due, outcome)
    # One given up after its due time goes again at once
    late = apply(run, Change(event=event, attempt=1, token=7, retry=RETRY_NOW), due + timedelta(seconds=3))
    assert late.due_at == due + timedelta(seconds=3)


def test_an_idempotent_write_is_tried_through_a_stream_leader_election_and_no_longer() -> None:
    waits = [retry.outage_wait(n) for n in range(1, retry.OUTAGE_TRIES)]
    assert waits == [0.25, 0.5, 1.0, 2.0, 2.0]
    assert sum(waits) == 5.75


def test_what_must_outlast_an_outage_waits_as_an_election_then_every_few_seconds() -> None:
    # A watch: the same steps through an election, then a steady pace for as long as the outage lasts
    assert [retry.outlasting_wait(n) for n in range(1, 10)] == [0.25, 0.5, 1.0, 2.0, 2.0, 5.0, 5.0, 5.0, 5.0]


@pytest.mark.parametrize("event", [RunEvent.SUCCEED, RunEvent.FAIL, RunEvent.HAND_BACK, RunEvent.START],
                         ids=lambda e: e.value)
def test_a_report_from_an_agent_the_run_was_not_assigned_to_is_refused(event: RunEvent) -> None:
    # Given a run assigned to a1 (RUNNING for the end reports, ASSIGNED for a start), with its token known
    run = make_run(RunState.ASSIGNED if event is RunEvent.START else RunState.RUNNING)
    forged = msgspec.structs.replace(change_for(event, run), agent="a2", agents=["a2"])
    # Then another agent's report, even one carrying the right attempt and token, changes nothing
    with pytest.raises(StaleReport, match="agent a2 was not assigned this run"):
        apply(run, forged, NOW)


@pytest.mark.parametrize(("state", "keeps_spec", "outcome"), [
    (RunState.SCHEDULED, True, ""), (RunState.WAITING, True, ""),
    (RunState.SKIPPED, False, "skipped"), (RunState.BLOCKED, True, "blocked"),
], ids=lambda v: getattr(v, "value", str(v)))
def test_a_new_run_takes_its_job_key_and_tenant_from_the_spec_and_is_terminal_only_if_born_so(
        state: RunState, keeps_spec: bool, outcome: str) -> None:
    from jetcron.core.lifecycle.runs import new_run

    spec = JobSpec(name="nightly", command=["true"], tenant="acme")
    run = new_run(spec, run_id="acme.nightly.20261130T120000000Z", state=state, scheduled_at=NOW, due_at=NOW,
                  now=NOW, reason="why")
    assert (run.job, run.tenant, run.state, run.reason) == ("acme.nightly", "acme", state, "why")
    assert (run.spec is spec) is keeps_spec
    assert (run.outcome, run.finished_at) == (outcome, NOW if outcome else None)

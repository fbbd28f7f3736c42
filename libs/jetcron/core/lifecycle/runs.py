"""apply(): the one place a run changes state, checked against the transition table."""

from __future__ import annotations

from datetime import datetime, timedelta

import msgspec

from jetcron.core.errors import Conflict, IllegalTransition, StaleReport
from jetcron.core.lifecycle.retry import RetryAction, RetryDecision
from jetcron.core.lifecycle.run_state import FENCED_EVENTS, LOST_OUTCOME, TRANSITIONS, RunEvent, RunState
from jetcron.core.models import AttemptRecord, JobSpec, Priority, Run


class Change(msgspec.Struct, frozen=True, kw_only=True):
    """An event with the data apply() needs to pick the target state."""

    event: RunEvent
    attempt: int | None = None
    """For agent reports: the attempt they are about."""
    token: int | None = None
    """For agent reports: the fencing token (run lease revision) they hold."""
    agent: str | None = None
    agents: list[str] = msgspec.field(default_factory=list)
    exit_code: int | None = None
    outcome: str = ""
    reason: str = ""
    retry: RetryDecision | None = None
    """For FAIL and LOSE: what the retry policy decided."""
    at: datetime | None = None
    """When it happened as the reporting agent saw it (default: the time apply() is called)."""
    delay_seconds: float = 0.0
    """For PREEMPT: the next attempt is due this long after, once the stopping attempt has had its grace period
    (it may save a checkpoint the next attempt loads)."""


def _check_fence(run: Run, change: Change, target: str) -> None:
    if change.event not in FENCED_EVENTS:
        return
    if change.attempt != run.attempt:
        raise StaleReport(
            run.run_id, run.state, target, f"report for attempt {change.attempt}, run is at attempt {run.attempt}"
        )
    if run.state is RunState.RUNNING and change.token != run.token:
        raise StaleReport(
            run.run_id, run.state, target, f"report with token {change.token}, run holds token {run.token}"
        )
    # Any agent's report (a start, a finish, a hand-back) counts only from an agent the run was assigned to: the
    # sender is the authenticated subject's (jetcron.wire.subjects.event_subject), so one agent cannot end another's
    # run.
    if change.agent is not None and run.agents and change.agent not in run.agents:
        raise StaleReport(run.run_id, run.state, target, f"agent {change.agent} was not assigned this run")


def _close_attempt(run: Run, change: Change, now: datetime, outcome: str) -> list[AttemptRecord]:
    record = AttemptRecord(
        attempt=run.attempt,
        agent=run.agent,
        token=run.token,
        outcome=outcome,
        exit_code=change.exit_code,
        reason=change.reason,
        started_at=run.started_at,
        finished_at=now,
    )
    return [*run.history, record]


def _next_attempt(run: Run, now: datetime, due_at: datetime, reason: str, history: list[AttemptRecord]) -> Run:
    return msgspec.structs.replace(
        run,
        state=RunState.SCHEDULED,
        attempt=run.attempt + 1,
        due_at=due_at,
        agent=None,
        agents=[],
        token=0,
        assigned_at=None,
        started_at=None,
        reason=reason,
        history=history,
    )


def _after_failure(run: Run, change: Change, now: datetime, outcome: str) -> Run:
    if change.retry is None:
        raise IllegalTransition(run.run_id, run.state, "?", f"{change.event} needs a retry decision")
    history = _close_attempt(run, change, now, outcome)
    decision = change.retry
    common = dict(history=history, exit_code=change.exit_code, outcome=outcome, finished_at=now)
    if decision.action is RetryAction.DEAD:
        return msgspec.structs.replace(run, state=RunState.DEAD, reason=decision.reason, **common)
    if decision.action is RetryAction.FAIL:
        return msgspec.structs.replace(run, state=RunState.FAILED, reason=decision.reason, **common)
    due = now + timedelta(seconds=decision.delay_seconds)
    if decision.delay_seconds <= 0:
        return _next_attempt(run, now, due, decision.reason, history)
    return msgspec.structs.replace(run, state=RunState.RETRY_WAIT, due_at=due, reason=decision.reason, **common)


def _pick(run: Run, change: Change, now: datetime) -> Run:
    e = change.event
    replace = msgspec.structs.replace
    if e is RunEvent.RELEASE:
        return replace(run, state=RunState.SCHEDULED, reason="", released_at=now)
    if e is RunEvent.WAIT:
        return replace(run, reason=change.reason)
    if e is RunEvent.ASSIGN:
        agents = change.agents or ([change.agent] if change.agent else [])
        # A reason on an assignment says what it took (placement: "preempting run X ..."); the start clears it.
        return replace(run, state=RunState.ASSIGNED, agent=agents[0], agents=agents, assigned_at=now,
                       reason=change.reason)
    if e is RunEvent.START:
        return replace(run, state=RunState.RUNNING, token=change.token or 0, started_at=now, reason="")
    if e is RunEvent.SUCCEED:
        history = _close_attempt(run, change, now, "succeeded")
        return replace(
            run,
            state=RunState.SUCCEEDED,
            exit_code=change.exit_code,
            outcome="succeeded",
            finished_at=now,
            reason=change.reason,
            history=history,
        )
    if e is RunEvent.FAIL:
        return _after_failure(run, change, now, change.outcome or "failed")
    if e is RunEvent.LOSE:
        if run.state is RunState.ASSIGNED:
            # Never started: the job did not fail, so this spends no attempt from the budget.
            history = _close_attempt(run, change, now, "not_started")
            why = change.reason or "assignment not started; re-dispatched"
            return _next_attempt(run, now, max(now, run.due_at), why, history)
        return _after_failure(run, change, now, LOST_OUTCOME)
    if e is RunEvent.HAND_BACK:
        history = _close_attempt(run, change, now, "handed_back")
        # A staged attempt given back before its due time: the next one must not start early either.
        return _next_attempt(run, now, max(now, run.due_at), change.reason or "handed back by draining agent",
                             history)
    if e is RunEvent.PREEMPT:
        # Not a failure: jetcron.core.lifecycle.retry counts none of it against the budget. The next attempt is queued
        # at once at its own priority, due when the stopped one has had its grace (SIGTERM, the grace, SIGKILL).
        history = _close_attempt(run, change, now, "preempted")
        due = now + timedelta(seconds=max(0.0, change.delay_seconds))
        return replace(_next_attempt(run, now, due, change.reason, history), preemptions=run.preemptions + 1)
    if e is RunEvent.RETRY:
        return _next_attempt(run, now, now, "", list(run.history))
    if e is RunEvent.CANCEL:
        history = (
            _close_attempt(run, change, now, "cancelled")
            if run.state in (RunState.RUNNING, RunState.ASSIGNED)
            else run.history
        )
        return replace(
            run,
            state=RunState.CANCELLED,
            outcome="cancelled",
            finished_at=now,
            reason=change.reason or "cancelled",
            history=history,
        )
    if e is RunEvent.SKIP:
        return replace(run, state=RunState.SKIPPED, outcome="skipped", finished_at=now, reason=change.reason)
    if e is RunEvent.BLOCK:
        return replace(run, state=RunState.BLOCKED, outcome="blocked", finished_at=now, reason=change.reason)
    raise AssertionError(f"unhandled event {e}")  # pragma: no cover - the table and this function move together


def apply(run: Run, change: Change, now: datetime) -> Run:
    """The run after `change`, or IllegalTransition / StaleReport; never mutates `run`."""
    now = change.at or now
    allowed = TRANSITIONS.get((run.state, change.event))
    if allowed is None:
        raise IllegalTransition(
            run.run_id, run.state, change.event, f"{change.event} is not allowed in state {run.state}"
        )
    _check_fence(run, change, change.event)
    new = _pick(run, change, now)
    if new.state not in allowed:  # pragma: no cover - guards the table against _pick drifting
        raise IllegalTransition(run.run_id, run.state, new.state, "not in the transition table")
    return new


_ENDED_AT_BIRTH = {RunState.SKIPPED: "skipped", RunState.BLOCKED: "blocked"}


def new_run(spec: JobSpec, *, run_id: str, state: RunState, scheduled_at: datetime, due_at: datetime,
            now: datetime, reason: str = "", after: str = "", flow_id: str = "", trace_id: str = "",
            keep_seconds: float | None = None, released_at: datetime | None = None) -> Run:
    """The one way a run record is made (trigger, api, DAG release): its job, tenant and snapshot from the
    spec, its retention (jetcron.core.lifecycle.retention.keep_seconds); an occurrence recorded skipped or blocked is
    terminal from birth (a skipped one keeps no snapshot). `released_at`: when a run joined on its upstreams took their
    successes, recorded ready (jetcron.core.lifecycle.dag.took_at)."""
    outcome = _ENDED_AT_BIRTH.get(state, "")
    return Run(run_id=run_id, job=spec.key, tenant=spec.tenant, state=state, scheduled_at=scheduled_at,
               due_at=due_at, created_at=now, spec=None if state is RunState.SKIPPED else spec, reason=reason,
               after=after, flow_id=flow_id, trace_id=trace_id, finished_at=now if outcome else None,
               outcome=outcome, keep_seconds=keep_seconds, released_at=released_at)


WAITING_STATES = frozenset({RunState.WAITING, RunState.SCHEDULED, RunState.RETRY_WAIT})
"""A run in these states has not started its current attempt: its priority and queue may still change."""


def reprioritized(run: Run, priority: Priority, queue: str | None) -> Run:
    """The run with its spec snapshot at another priority (and queue), or Conflict when it has started or ended
    (its place is taken, or its record is history): a job's new priority applies to its later occurrences."""
    if run.state not in WAITING_STATES or run.spec is None:
        raise Conflict(f"run {run.run_id} is {run.state}: only a run that has not started can be reprioritized")
    spec = msgspec.structs.replace(run.spec, priority=priority, queue=queue if queue is not None else run.spec.queue)
    return msgspec.structs.replace(run, spec=spec)


def priority_allowed(priority: Priority, ceiling: Priority | None) -> bool:
    """Whether a tenant whose policy caps it at `ceiling` may use `priority` (critical is the highest)."""
    return ceiling is None or priority.rank >= ceiling.rank

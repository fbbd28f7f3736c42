"""What state a run is in and what comes next: the state machines, retries, flows and their joins, leases and
takeovers, the reconciler's judgement, history kept, and what an owner is told. Pure: no I/O.

Each module's public names are re-exported here, loaded on first use: importing one module of the group
loads that module alone."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from jetcron.core.lifecycle.attempt_state import (
        REPORTS as REPORTS,
    )
    from jetcron.core.lifecycle.attempt_state import (
        AttemptEvent as AttemptEvent,
    )
    from jetcron.core.lifecycle.attempt_state import (
        AttemptPhase as AttemptPhase,
    )
    from jetcron.core.lifecycle.attempt_state import (
        IllegalAttemptMove as IllegalAttemptMove,
    )
    from jetcron.core.lifecycle.attempt_state import (
        advance as advance,
    )
    from jetcron.core.lifecycle.attempt_state import (
        allows as allows,
    )
    from jetcron.core.lifecycle.dag import (
        DEFAULT_WAIT_SECONDS as DEFAULT_WAIT_SECONDS,
    )
    from jetcron.core.lifecycle.dag import (
        MAX_UPSTREAMS as MAX_UPSTREAMS,
    )
    from jetcron.core.lifecycle.dag import (
        MAX_WAIT_SECONDS as MAX_WAIT_SECONDS,
    )
    from jetcron.core.lifecycle.dag import (
        check_join as check_join,
    )
    from jetcron.core.lifecycle.dag import (
        downstream as downstream,
    )
    from jetcron.core.lifecycle.dag import (
        find_cycle as find_cycle,
    )
    from jetcron.core.lifecycle.dag import (
        join_of as join_of,
    )
    from jetcron.core.lifecycle.dag import (
        not_since as not_since,
    )
    from jetcron.core.lifecycle.dag import (
        render as render,
    )
    from jetcron.core.lifecycle.dag import (
        roots as roots,
    )
    from jetcron.core.lifecycle.dag import (
        roots_apart as roots_apart,
    )
    from jetcron.core.lifecycle.dag import (
        upstream_closure as upstream_closure,
    )
    from jetcron.core.lifecycle.dag import (
        validate_dependencies as validate_dependencies,
    )
    from jetcron.core.lifecycle.dag import (
        wait_timeout as wait_timeout,
    )
    from jetcron.core.lifecycle.departures import (
        Found as Found,
    )
    from jetcron.core.lifecycle.departures import (
        lapsed_with as lapsed_with,
    )
    from jetcron.core.lifecycle.departures import (
        standing_still as standing_still,
    )
    from jetcron.core.lifecycle.ended import KEEP_S as KEEP_S
    from jetcron.core.lifecycle.ended import MAX_KEPT as MAX_KEPT
    from jetcron.core.lifecycle.finished import (
        GUARD as GUARD,
    )
    from jetcron.core.lifecycle.finished import (
        MINUTE as MINUTE,
    )
    from jetcron.core.lifecycle.finished import (
        STAMP as STAMP,
    )
    from jetcron.core.lifecycle.finished import (
        WINDOW as WINDOW,
    )
    from jetcron.core.lifecycle.finished import (
        FinishedMinute as FinishedMinute,
    )
    from jetcron.core.lifecycle.finished import (
        Scope as Scope,
    )
    from jetcron.core.lifecycle.finished import (
        Tally as Tally,
    )
    from jetcron.core.lifecycle.finished import (
        dense as dense,
    )
    from jetcron.core.lifecycle.finished import (
        first_minute as first_minute,
    )
    from jetcron.core.lifecycle.finished import (
        merged as merged,
    )
    from jetcron.core.lifecycle.finished import (
        minute_of as minute_of,
    )
    from jetcron.core.lifecycle.finished import (
        parse_stamp as parse_stamp,
    )
    from jetcron.core.lifecycle.finished import (
        stamp as stamp,
    )
    from jetcron.core.lifecycle.gang_end import MemberStop as MemberStop
    from jetcron.core.lifecycle.gang_end import member_stop as member_stop
    from jetcron.core.lifecycle.handoff import (
        BATCH_REQUESTS as BATCH_REQUESTS,
    )
    from jetcron.core.lifecycle.handoff import (
        DIRECT_REPORTS_MOST as DIRECT_REPORTS_MOST,
    )
    from jetcron.core.lifecycle.handoff import (
        QUIET_FOR as QUIET_FOR,
    )
    from jetcron.core.lifecycle.handoff import (
        answer_each as answer_each,
    )
    from jetcron.core.lifecycle.handoff import (
        report_directly as report_directly,
    )
    from jetcron.core.lifecycle.handoff import (
        report_requests as report_requests,
    )
    from jetcron.core.lifecycle.handoff import (
        taken_each as taken_each,
    )
    from jetcron.core.lifecycle.join_marks import (
        DEPENDENTS as DEPENDENTS,
    )
    from jetcron.core.lifecycle.join_marks import (
        UNRUN as UNRUN,
    )
    from jetcron.core.lifecycle.join_marks import (
        JoinMark as JoinMark,
    )
    from jetcron.core.lifecycle.join_marks import (
        Mark as Mark,
    )
    from jetcron.core.lifecycle.join_marks import (
        dependent_key as dependent_key,
    )
    from jetcron.core.lifecycle.join_marks import (
        dependents_filter as dependents_filter,
    )
    from jetcron.core.lifecycle.join_marks import (
        from_newest as from_newest,
    )
    from jetcron.core.lifecycle.join_marks import (
        mark_key as mark_key,
    )
    from jetcron.core.lifecycle.join_marks import (
        marks_of as marks_of,
    )
    from jetcron.core.lifecycle.join_marks import (
        raised as raised,
    )
    from jetcron.core.lifecycle.join_marks import (
        ran as ran,
    )
    from jetcron.core.lifecycle.join_marks import (
        succeeded as succeeded,
    )
    from jetcron.core.lifecycle.join_marks import (
        waits as waits,
    )
    from jetcron.core.lifecycle.leases import (
        CLAIM_WITHIN as CLAIM_WITHIN,
    )
    from jetcron.core.lifecycle.leases import (
        claim_by as claim_by,
    )
    from jetcron.core.lifecycle.leases import (
        claims_late as claims_late,
    )
    from jetcron.core.lifecycle.leases import (
        fence_at as fence_at,
    )
    from jetcron.core.lifecycle.leases import (
        fencing_floor as fencing_floor,
    )
    from jetcron.core.lifecycle.leases import (
        first_grant as first_grant,
    )
    from jetcron.core.lifecycle.leases import (
        foreign_claim as foreign_claim,
    )
    from jetcron.core.lifecycle.leases import (
        outlasting as outlasting,
    )
    from jetcron.core.lifecycle.leases import (
        record_tokens as record_tokens,
    )
    from jetcron.core.lifecycle.leases import (
        renew_at as renew_at,
    )
    from jetcron.core.lifecycle.notify import (
        DELIVERY_HEADER as DELIVERY_HEADER,
    )
    from jetcron.core.lifecycle.notify import (
        DELIVERY_ID_RE as DELIVERY_ID_RE,
    )
    from jetcron.core.lifecycle.notify import (
        EMAIL_RE as EMAIL_RE,
    )
    from jetcron.core.lifecycle.notify import (
        EVENT_HEADER as EVENT_HEADER,
    )
    from jetcron.core.lifecycle.notify import (
        MAX_RULES as MAX_RULES,
    )
    from jetcron.core.lifecycle.notify import (
        MAX_URL as MAX_URL,
    )
    from jetcron.core.lifecycle.notify import (
        NEVER_FIRED as NEVER_FIRED,
    )
    from jetcron.core.lifecycle.notify import (
        SECRET_NAME_RE as SECRET_NAME_RE,
    )
    from jetcron.core.lifecycle.notify import (
        SIGNATURE_HEADER as SIGNATURE_HEADER,
    )
    from jetcron.core.lifecycle.notify import (
        SUBJECT_RE as SUBJECT_RE,
    )
    from jetcron.core.lifecycle.notify import (
        Delivery as Delivery,
    )
    from jetcron.core.lifecycle.notify import (
        DeliveryAttempt as DeliveryAttempt,
    )
    from jetcron.core.lifecycle.notify import (
        Notice as Notice,
    )
    from jetcron.core.lifecycle.notify import (
        address_allowed as address_allowed,
    )
    from jetcron.core.lifecycle.notify import (
        after_try as after_try,
    )
    from jetcron.core.lifecycle.notify import (
        check_deadlines as check_deadlines,
    )
    from jetcron.core.lifecycle.notify import (
        check_rules as check_rules,
    )
    from jetcron.core.lifecycle.notify import (
        check_webhook as check_webhook,
    )
    from jetcron.core.lifecycle.notify import (
        delivery_key as delivery_key,
    )
    from jetcron.core.lifecycle.notify import (
        first_start as first_start,
    )
    from jetcron.core.lifecycle.notify import (
        job_deliveries as job_deliveries,
    )
    from jetcron.core.lifecycle.notify import (
        missed_deadlines as missed_deadlines,
    )
    from jetcron.core.lifecycle.notify import (
        notices as notices,
    )
    from jetcron.core.lifecycle.notify import (
        period_seconds as period_seconds,
    )
    from jetcron.core.lifecycle.notify import (
        reached_address as reached_address,
    )
    from jetcron.core.lifecycle.notify import (
        redelivered as redelivered,
    )
    from jetcron.core.lifecycle.notify import (
        sign as sign,
    )
    from jetcron.core.lifecycle.notify import (
        verify as verify,
    )
    from jetcron.core.lifecycle.notify import (
        with_missed as with_missed,
    )
    from jetcron.core.lifecycle.reconcile import (
        HEARTBEATS_TO_GONE as HEARTBEATS_TO_GONE,
    )
    from jetcron.core.lifecycle.reconcile import (
        REDRIVE_GAP_MAX as REDRIVE_GAP_MAX,
    )
    from jetcron.core.lifecycle.reconcile import (
        REPORT_WAIT_CAP as REPORT_WAIT_CAP,
    )
    from jetcron.core.lifecycle.reconcile import (
        Awaiting as Awaiting,
    )
    from jetcron.core.lifecycle.reconcile import (
        Beat as Beat,
    )
    from jetcron.core.lifecycle.reconcile import (
        GangLooks as GangLooks,
    )
    from jetcron.core.lifecycle.reconcile import (
        Timing as Timing,
    )
    from jetcron.core.lifecycle.reconcile import (
        Tracked as Tracked,
    )
    from jetcron.core.lifecycle.reconcile import (
        Verdict as Verdict,
    )
    from jetcron.core.lifecycle.reconcile import (
        beat_seen as beat_seen,
    )
    from jetcron.core.lifecycle.reconcile import (
        first_sight as first_sight,
    )
    from jetcron.core.lifecycle.reconcile import (
        index_form as index_form,
    )
    from jetcron.core.lifecycle.reconcile import (
        may_still_report as may_still_report,
    )
    from jetcron.core.lifecycle.reconcile import (
        quiet_until as quiet_until,
    )
    from jetcron.core.lifecycle.reconcile import (
        release as release,
    )
    from jetcron.core.lifecycle.reconcile import (
        same_step as same_step,
    )
    from jetcron.core.lifecycle.reconcile import (
        stall as stall,
    )
    from jetcron.core.lifecycle.reconcile import (
        track as track,
    )
    from jetcron.core.lifecycle.reconcile import (
        whole as whole,
    )
    from jetcron.core.lifecycle.reconcile import (
        with_horizon as with_horizon,
    )
    from jetcron.core.lifecycle.reconcile_steps import (
        STAY as STAY,
    )
    from jetcron.core.lifecycle.reconcile_steps import (
        Action as Action,
    )
    from jetcron.core.lifecycle.reconcile_steps import (
        AgentIdle as AgentIdle,
    )
    from jetcron.core.lifecycle.reconcile_steps import (
        AgentReports as AgentReports,
    )
    from jetcron.core.lifecycle.reconcile_steps import (
        AgentSeen as AgentSeen,
    )
    from jetcron.core.lifecycle.reconcile_steps import (
        AskAgentIdle as AskAgentIdle,
    )
    from jetcron.core.lifecycle.reconcile_steps import (
        AskAgentReports as AskAgentReports,
    )
    from jetcron.core.lifecycle.reconcile_steps import (
        Claim as Claim,
    )
    from jetcron.core.lifecycle.reconcile_steps import (
        Look as Look,
    )
    from jetcron.core.lifecycle.reconcile_steps import (
        Lose as Lose,
    )
    from jetcron.core.lifecycle.reconcile_steps import (
        Loss as Loss,
    )
    from jetcron.core.lifecycle.reconcile_steps import (
        MemberLease as MemberLease,
    )
    from jetcron.core.lifecycle.reconcile_steps import (
        NeedHorizon as NeedHorizon,
    )
    from jetcron.core.lifecycle.reconcile_steps import (
        Park as Park,
    )
    from jetcron.core.lifecycle.reconcile_steps import (
        ReadAgentLease as ReadAgentLease,
    )
    from jetcron.core.lifecycle.reconcile_steps import (
        ReadLease as ReadLease,
    )
    from jetcron.core.lifecycle.reconcile_steps import (
        ReadMemberLease as ReadMemberLease,
    )
    from jetcron.core.lifecycle.reconcile_steps import (
        ReadUpstream as ReadUpstream,
    )
    from jetcron.core.lifecycle.reconcile_steps import (
        Redrive as Redrive,
    )
    from jetcron.core.lifecycle.reconcile_steps import (
        Release as Release,
    )
    from jetcron.core.lifecycle.reconcile_steps import (
        Retry as Retry,
    )
    from jetcron.core.lifecycle.reconcile_steps import (
        RunLease as RunLease,
    )
    from jetcron.core.lifecycle.reconcile_steps import (
        Start as Start,
    )
    from jetcron.core.lifecycle.reconcile_steps import (
        Stay as Stay,
    )
    from jetcron.core.lifecycle.reconcile_steps import (
        TakeAway as TakeAway,
    )
    from jetcron.core.lifecycle.reconcile_steps import (
        Upstream as Upstream,
    )
    from jetcron.core.lifecycle.retention import (
        ClusterHistory as ClusterHistory,
    )
    from jetcron.core.lifecycle.retention import (
        fires_by_mark as fires_by_mark,
    )
    from jetcron.core.lifecycle.retention import (
        gate_seconds as gate_seconds,
    )
    from jetcron.core.lifecycle.retention import (
        job_ttl as job_ttl,
    )
    from jetcron.core.lifecycle.retention import (
        keep_seconds as keep_seconds,
    )
    from jetcron.core.lifecycle.retention import (
        may_shed as may_shed,
    )
    from jetcron.core.lifecycle.retention import (
        one_shot as one_shot,
    )
    from jetcron.core.lifecycle.retention import (
        over_count as over_count,
    )
    from jetcron.core.lifecycle.retention import (
        record_ttl as record_ttl,
    )
    from jetcron.core.lifecycle.retention import (
        resolve as resolve,
    )
    from jetcron.core.lifecycle.retention import (
        settled as settled,
    )
    from jetcron.core.lifecycle.retention import (
        stream_ttl as stream_ttl,
    )
    from jetcron.core.lifecycle.retention import (
        to_free as to_free,
    )
    from jetcron.core.lifecycle.retention import (
        validate_history as validate_history,
    )
    from jetcron.core.lifecycle.retry import (
        FAILURE_OUTCOMES as FAILURE_OUTCOMES,
    )
    from jetcron.core.lifecycle.retry import (
        OUTAGE_TRIES as OUTAGE_TRIES,
    )
    from jetcron.core.lifecycle.retry import (
        OUTLASTING_WAIT as OUTLASTING_WAIT,
    )
    from jetcron.core.lifecycle.retry import (
        RetryAction as RetryAction,
    )
    from jetcron.core.lifecycle.retry import (
        RetryDecision as RetryDecision,
    )
    from jetcron.core.lifecycle.retry import (
        backoff_delay as backoff_delay,
    )
    from jetcron.core.lifecycle.retry import (
        decide as decide,
    )
    from jetcron.core.lifecycle.retry import (
        failures_so_far as failures_so_far,
    )
    from jetcron.core.lifecycle.retry import (
        outage_wait as outage_wait,
    )
    from jetcron.core.lifecycle.retry import (
        outlasting_wait as outlasting_wait,
    )
    from jetcron.core.lifecycle.run_state import (
        ACTIVE as ACTIVE,
    )
    from jetcron.core.lifecycle.run_state import (
        FENCED_EVENTS as FENCED_EVENTS,
    )
    from jetcron.core.lifecycle.run_state import (
        LOST_OUTCOME as LOST_OUTCOME,
    )
    from jetcron.core.lifecycle.run_state import (
        TERMINAL as TERMINAL,
    )
    from jetcron.core.lifecycle.run_state import (
        RunEvent as RunEvent,
    )
    from jetcron.core.lifecycle.run_state import (
        RunState as RunState,
    )
    from jetcron.core.lifecycle.runs import (
        WAITING_STATES as WAITING_STATES,
    )
    from jetcron.core.lifecycle.runs import (
        Change as Change,
    )
    from jetcron.core.lifecycle.runs import (
        apply as apply,
    )
    from jetcron.core.lifecycle.runs import (
        new_run as new_run,
    )
    from jetcron.core.lifecycle.runs import (
        priority_allowed as priority_allowed,
    )
    from jetcron.core.lifecycle.runs import (
        reprioritized as reprioritized,
    )
    from jetcron.core.lifecycle.takeover import (
        MAX_GAP as MAX_GAP,
    )
    from jetcron.core.lifecycle.takeover import (
        Sighting as Sighting,
    )
    from jetcron.core.lifecycle.takeover import (
        forget_departed as forget_departed,
    )
    from jetcron.core.lifecycle.takeover import (
        fresh as fresh,
    )
    from jetcron.core.lifecycle.takeover import (
        gap as gap,
    )
    from jetcron.core.lifecycle.takeover import (
        last_of_departed as last_of_departed,
    )
    from jetcron.core.lifecycle.takeover import (
        previous_action as previous_action,
    )

_HOME = {
    "ACTIVE": "run_state",
    "Action": "reconcile_steps",
    "AgentIdle": "reconcile_steps",
    "AgentReports": "reconcile_steps",
    "AgentSeen": "reconcile_steps",
    "AskAgentIdle": "reconcile_steps",
    "AskAgentReports": "reconcile_steps",
    "AttemptEvent": "attempt_state",
    "AttemptPhase": "attempt_state",
    "Awaiting": "reconcile",
    "BATCH_REQUESTS": "handoff",
    "Beat": "reconcile",
    "CLAIM_WITHIN": "leases",
    "Change": "runs",
    "Claim": "reconcile_steps",
    "ClusterHistory": "retention",
    "DEFAULT_WAIT_SECONDS": "dag",
    "DELIVERY_HEADER": "notify",
    "DELIVERY_ID_RE": "notify",
    "DEPENDENTS": "join_marks",
    "DIRECT_REPORTS_MOST": "handoff",
    "Delivery": "notify",
    "DeliveryAttempt": "notify",
    "EMAIL_RE": "notify",
    "EVENT_HEADER": "notify",
    "FAILURE_OUTCOMES": "retry",
    "FENCED_EVENTS": "run_state",
    "FinishedMinute": "finished",
    "Found": "departures",
    "GUARD": "finished",
    "GangLooks": "reconcile",
    "HEARTBEATS_TO_GONE": "reconcile",
    "IllegalAttemptMove": "attempt_state",
    "JoinMark": "join_marks",
    "KEEP_S": "ended",
    "LOST_OUTCOME": "run_state",
    "Look": "reconcile_steps",
    "Lose": "reconcile_steps",
    "Loss": "reconcile_steps",
    "MAX_GAP": "takeover",
    "MAX_KEPT": "ended",
    "MAX_RULES": "notify",
    "MAX_UPSTREAMS": "dag",
    "MAX_URL": "notify",
    "MAX_WAIT_SECONDS": "dag",
    "MINUTE": "finished",
    "Mark": "join_marks",
    "MemberLease": "reconcile_steps",
    "MemberStop": "gang_end",
    "NEVER_FIRED": "notify",
    "NeedHorizon": "reconcile_steps",
    "Notice": "notify",
    "OUTAGE_TRIES": "retry",
    "OUTLASTING_WAIT": "retry",
    "Park": "reconcile_steps",
    "QUIET_FOR": "handoff",
    "REDRIVE_GAP_MAX": "reconcile",
    "REPORTS": "attempt_state",
    "REPORT_WAIT_CAP": "reconcile",
    "ReadAgentLease": "reconcile_steps",
    "ReadLease": "reconcile_steps",
    "ReadMemberLease": "reconcile_steps",
    "ReadUpstream": "reconcile_steps",
    "Redrive": "reconcile_steps",
    "Release": "reconcile_steps",
    "Retry": "reconcile_steps",
    "RetryAction": "retry",
    "RetryDecision": "retry",
    "RunEvent": "run_state",
    "RunLease": "reconcile_steps",
    "RunState": "run_state",
    "SECRET_NAME_RE": "notify",
    "SIGNATURE_HEADER": "notify",
    "STAMP": "finished",
    "STAY": "reconcile_steps",
    "SUBJECT_RE": "notify",
    "Scope": "finished",
    "Sighting": "takeover",
    "Start": "reconcile_steps",
    "Stay": "reconcile_steps",
    "TERMINAL": "run_state",
    "TakeAway": "reconcile_steps",
    "Tally": "finished",
    "Timing": "reconcile",
    "Tracked": "reconcile",
    "UNRUN": "join_marks",
    "Upstream": "reconcile_steps",
    "Verdict": "reconcile",
    "WAITING_STATES": "runs",
    "WINDOW": "finished",
    "address_allowed": "notify",
    "advance": "attempt_state",
    "after_try": "notify",
    "allows": "attempt_state",
    "answer_each": "handoff",
    "apply": "runs",
    "backoff_delay": "retry",
    "beat_seen": "reconcile",
    "check_deadlines": "notify",
    "check_join": "dag",
    "check_rules": "notify",
    "check_webhook": "notify",
    "claim_by": "leases",
    "claims_late": "leases",
    "decide": "retry",
    "delivery_key": "notify",
    "dense": "finished",
    "dependent_key": "join_marks",
    "dependents_filter": "join_marks",
    "downstream": "dag",
    "failures_so_far": "retry",
    "fence_at": "leases",
    "fencing_floor": "leases",
    "find_cycle": "dag",
    "fires_by_mark": "retention",
    "first_grant": "leases",
    "first_minute": "finished",
    "first_sight": "reconcile",
    "first_start": "notify",
    "foreign_claim": "leases",
    "forget_departed": "takeover",
    "fresh": "takeover",
    "from_newest": "join_marks",
    "gap": "takeover",
    "gate_seconds": "retention",
    "index_form": "reconcile",
    "job_deliveries": "notify",
    "job_ttl": "retention",
    "join_of": "dag",
    "keep_seconds": "retention",
    "lapsed_with": "departures",
    "last_of_departed": "takeover",
    "mark_key": "join_marks",
    "marks_of": "join_marks",
    "may_shed": "retention",
    "may_still_report": "reconcile",
    "member_stop": "gang_end",
    "merged": "finished",
    "minute_of": "finished",
    "missed_deadlines": "notify",
    "new_run": "runs",
    "not_since": "dag",
    "notices": "notify",
    "one_shot": "retention",
    "outage_wait": "retry",
    "outlasting": "leases",
    "outlasting_wait": "retry",
    "over_count": "retention",
    "parse_stamp": "finished",
    "period_seconds": "notify",
    "previous_action": "takeover",
    "priority_allowed": "runs",
    "quiet_until": "reconcile",
    "raised": "join_marks",
    "ran": "join_marks",
    "reached_address": "notify",
    "record_tokens": "leases",
    "record_ttl": "retention",
    "redelivered": "notify",
    "release": "reconcile",
    "render": "dag",
    "renew_at": "leases",
    "report_directly": "handoff",
    "report_requests": "handoff",
    "reprioritized": "runs",
    "resolve": "retention",
    "roots": "dag",
    "roots_apart": "dag",
    "same_step": "reconcile",
    "settled": "retention",
    "sign": "notify",
    "stall": "reconcile",
    "stamp": "finished",
    "standing_still": "departures",
    "stream_ttl": "retention",
    "succeeded": "join_marks",
    "taken_each": "handoff",
    "to_free": "retention",
    "track": "reconcile",
    "upstream_closure": "dag",
    "validate_dependencies": "dag",
    "validate_history": "retention",
    "verify": "notify",
    "wait_timeout": "dag",
    "waits": "join_marks",
    "whole": "reconcile",
    "with_horizon": "reconcile",
    "with_missed": "notify",
}
"""Where each re-exported name is defined, by module of jetcron.core.lifecycle."""

__all__ = sorted(_HOME)


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{home}"), name)

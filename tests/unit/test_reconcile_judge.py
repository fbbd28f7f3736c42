"""The reconciler's decisions (jetcron.core.lifecycle.reconcile): for each look at a run, the next read or what to do,
at the edges of every timeout. TTL 10 s (confirm: 0.5 s), stall 30 s, re-drive every 30 s."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from msgspec.structs import replace

from jetcron.core.lifecycle.reconcile import (
    REPORT_WAIT_CAP,
    Awaiting,
    Beat,
    GangLooks,
    Timing,
    Tracked,
    beat_seen,
    judge,
    may_still_report,
    quiet_until,
    release,
    track,
    with_horizon,
)
from jetcron.core.lifecycle.reconcile_steps import (
    STAY,
    Action,
    AgentIdle,
    AgentReports,
    AgentSeen,
    AskAgentIdle,
    AskAgentReports,
    Claim,
    Look,
    Lose,
    Loss,
    MemberLease,
    NeedHorizon,
    Park,
    Quiet,
    ReadAgentLease,
    ReadLease,
    ReadMemberLease,
    ReadUpstream,
    Redrive,
    Release,
    Retry,
    RunLease,
    Start,
    TakeAway,
    Upstream,
)
from jetcron.core.models import AttemptRecord, JobSpec, Run, RunState

T0 = datetime(2027, 1, 1, tzinfo=UTC)
TIMING = Timing(lease_ttl=10.0, assign_stall=30.0, redrive_after=30.0)
US = timedelta(microseconds=1)
S, A, R = RunState.SCHEDULED, RunState.ASSIGNED, RunState.RUNNING


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def run(state: RunState = R, **kw: Any) -> Run:
    fields: dict[str, Any] = {"run_id": "j.x", "job": "j", "state": state, "attempt": 1, "scheduled_at": T0,
                              "due_at": T0, "created_at": T0, "spec": JobSpec(name="j", command=["true"])}
    if state in (A, R):
        fields |= {"agent": "a1", "agents": ["a1"], "assigned_at": T0}
    if state is R:
        fields["started_at"] = T0
    return Run(**(fields | kw))


def tracked(r: Run | None = None, **facts: Any) -> Tracked:
    return Tracked(run=r if r is not None else run(), revision=1, **facts)


def gang(state: RunState = R) -> Run:
    return run(state, agents=["a1", "a2", "a3"])


def live(ttl: float | None = 10.0, written: float = 0.0, holder: str = "a1", attempt: int = 1) -> Claim:
    return Claim(holder=holder, attempt=attempt, writer=holder, written_at=at(written), ttl=ttl)


def step(t: Tracked, look: Look, now: float) -> tuple[Action, Tracked]:
    verdict = judge(t, look, at(now), TIMING)
    return verdict.action, verdict.tracked


# --- the first look: the record alone -------------------------------------------------------------------------

FIRST = [
    pytest.param(tracked(run(RunState.RETRY_WAIT, due_at=at(5))), 5, Retry(), id="retry_due_now"),
    pytest.param(tracked(run(RunState.RETRY_WAIT, due_at=at(5))), 5 - 1e-6, STAY, id="retry_not_yet_due"),
    pytest.param(tracked(run(S)), 30, STAY, id="scheduled_redrive_after_is_strict"),
    pytest.param(tracked(run(S)), 30.000001, Redrive(times=1), id="scheduled_past_redrive_after"),
    pytest.param(tracked(run(S)), 95, Redrive(times=3), id="scheduled_redrive_counts_periods"),
    pytest.param(tracked(run(S), looked=at(65)), 95, Quiet(until=at(130)), id="scheduled_redriven_a_period_ago_waits"),
    pytest.param(tracked(run(S), looked=at(30.000001)), 60.000003, Redrive(times=2),
                 id="scheduled_redriven_again_a_period_after_the_first"),
    pytest.param(tracked(run(S), looked=at(65)), 130, Quiet(until=at(130)),
                 id="scheduled_redrive_waits_as_long_as_it_was_late"),
    pytest.param(tracked(run(S), looked=at(65)), 130.000001, Redrive(times=4),
                 id="scheduled_redriven_at_twice_the_age_of_the_last"),
    pytest.param(tracked(run(S), looked=at(3600)), 3600 + 960, Quiet(until=at(3600 + 960)),
                 id="scheduled_redrive_gap_capped_is_strict"),
    pytest.param(tracked(run(S), looked=at(3600)), 3600 + 960.000001, Redrive(times=152),
                 id="scheduled_redrive_gap_capped"),
    pytest.param(tracked(run(A)), 30, STAY, id="assigned_stall_is_strict"),
    pytest.param(tracked(run(A)), 30.000001, AskAgentIdle(agent="a1"), id="assigned_stalled_asks_its_agent"),
    pytest.param(tracked(run(A, due_at=at(500))), 529, STAY, id="staged_assignment_stalls_after_its_due_time"),
    pytest.param(tracked(run(A, due_at=at(500))), 531, AskAgentIdle(agent="a1"), id="staged_assignment_stalled"),
    pytest.param(tracked(run(A, agent=None)), 31, ReadLease(), id="assigned_without_agent_reads_its_lease"),
    pytest.param(tracked(run(A, assigned_at=None)), 31, STAY, id="assigned_without_time_waits"),
    pytest.param(tracked(), 1, ReadLease(), id="running_never_looked_at"),
    pytest.param(tracked(next_look=at(20)), 20 - 1e-6, STAY, id="running_lease_cannot_have_lapsed_yet"),
    pytest.param(tracked(next_look=at(20)), 20, ReadLease(), id="running_lease_could_have_lapsed"),
    pytest.param(tracked(lease_gone_since=at(10), looked=at(10)), 10.499999, STAY, id="gone_confirm_not_yet"),
    pytest.param(tracked(lease_gone_since=at(10), looked=at(10)), 10.5, ReadLease(), id="gone_confirm_due"),
    pytest.param(tracked(lease_gone_since=at(10), looked=at(11)), 11.249999, STAY, id="gone_again_not_yet"),
    pytest.param(tracked(lease_gone_since=at(10), looked=at(11)), 11.25, ReadLease(), id="gone_again_every_half"),
    pytest.param(tracked(run(RunState.WAITING, after="j.prev")), 0, ReadUpstream(run_id="j.prev"),
                 id="waiting_looks_at_its_upstream"),
    pytest.param(tracked(run(RunState.WAITING)), 0, STAY, id="waiting_on_nothing"),
    pytest.param(tracked(gang(A)), 29.999999, STAY, id="gang_assigned_before_its_stall"),
    pytest.param(tracked(gang(A)), 30, ReadMemberLease(index=1), id="gang_assigned_at_its_stall_reads_members"),
    pytest.param(tracked(gang(R)), 9.999999, ReadLease(), id="gang_running_members_not_yet_due"),
    pytest.param(tracked(gang(R)), 10, ReadMemberLease(index=1), id="gang_running_members_due_after_ttl"),
    pytest.param(tracked(gang(R), gang=GangLooks(attempt=1, looked=at(10))), 12.499999, ReadLease(),
                 id="gang_members_read_at_most_every_quarter_ttl"),
    pytest.param(tracked(gang(R), gang=GangLooks(attempt=1, looked=at(10))), 12.5, ReadMemberLease(index=1),
                 id="gang_members_read_again"),
    pytest.param(tracked(gang(R), gang=GangLooks(attempt=0, looked=at(10))), 11, ReadMemberLease(index=1),
                 id="gang_looks_of_an_older_attempt_do_not_count"),
]


@pytest.mark.parametrize(("t", "now", "action"), FIRST)
def test_first_look(t: Tracked, now: float, action: Action) -> None:
    assert step(t, Start(), now)[0] == action


def test_a_lease_read_or_a_redrive_is_remembered_as_the_last_look() -> None:
    assert step(tracked(), Start(), 3)[1].looked == at(3)
    assert step(tracked(run(S)), Start(), 31)[1].looked == at(31)
    assert step(tracked(next_look=at(20)), Start(), 3)[1].looked is None


def test_reading_a_gangs_members_keeps_who_was_missing() -> None:
    looks = GangLooks(attempt=1, looked=at(10), missing={"a2": at(10)})
    _, t = step(tracked(gang(R), gang=looks), Start(), 20)
    assert t.gang == GangLooks(attempt=1, looked=at(20), missing={"a2": at(10)})


# --- gang members ---------------------------------------------------------------------------------------------

MISSING_A2 = GangLooks(attempt=1, looked=at(10), missing={"a2": at(10)})
LOST_A2 = Lose(loss=Loss.GANG_MEMBER,
               reason="gang member a2 lost (its lease lapsed): the gang is torn down and re-queued")

MEMBERS = [
    pytest.param(None, 1, None, 12, ReadMemberLease(index=2), {"a2": at(12)}, id="first_seen_missing"),
    pytest.param(MISSING_A2, 1, None, 14.999999, ReadMemberLease(index=2), {"a2": at(10)}, id="missing_under_half_ttl"),
    pytest.param(MISSING_A2, 1, None, 15, LOST_A2, {"a2": at(10)}, id="missing_for_half_ttl_loses"),
    pytest.param(MISSING_A2, 1, live(), 15, ReadMemberLease(index=2), {}, id="back_again"),
    pytest.param(MISSING_A2, 1, live(attempt=0), 15, LOST_A2, {"a2": at(10)}, id="an_older_attempts_lease_is_missing"),
    pytest.param(MISSING_A2, 1, live(holder=""), 15, LOST_A2, {"a2": at(10)}, id="a_released_lease_is_missing"),
    pytest.param(MISSING_A2, 2, live(), 15, ReadLease(), {"a2": at(10)}, id="last_member_then_the_run_lease"),
]


@pytest.mark.parametrize(("looks", "index", "claim", "now", "action", "missing"), MEMBERS)
def test_member_lease(looks: GangLooks | None, index: int, claim: Claim | None, now: float, action: Action,
                      missing: dict[str, datetime]) -> None:
    t = tracked(gang(R), gang=looks)
    got, after = step(t, MemberLease(index=index, claim=claim), now)
    assert got == action
    assert after.gang is not None and after.gang.missing == missing


def test_a_gang_assignment_with_every_member_there_goes_on_to_its_own_stall_check() -> None:
    t = tracked(gang(A), gang=GangLooks(attempt=1, looked=at(31)))
    assert step(t, MemberLease(index=2, claim=live()), 31)[0] == AskAgentIdle(agent="a1")


# --- the run lease --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("idle", "action"), [(True, ReadLease()), (False, STAY)], ids=["idle_or_gone", "busy"])
def test_a_stalled_assignment_is_looked_at_only_if_its_agent_is_idle_or_gone(idle: bool, action: Action) -> None:
    assert step(tracked(run(A)), AgentIdle(idle=idle), 31)[0] == action


LIVE = [
    pytest.param(run(), live(ttl=10, written=0), 3, at(10), id="expires_ttl_after_its_write"),
    pytest.param(run(), live(ttl=620, written=-500), 31, at(120), id="a_staged_grant_carries_its_own_ttl"),
    pytest.param(run(), live(ttl=None, written=0), 3, at(10), id="no_ttl_on_the_write_run_lease_ttl"),
    pytest.param(run(), live(ttl=10, written=100), 3, at(13), id="server_clock_ahead_capped_at_ttl_from_now"),
    pytest.param(run(), live(ttl=10, written=-20), 3, at(4), id="just_renewed_late_looked_at_within_a_second"),
    pytest.param(run(), Claim(holder="a1", attempt=1, ttl=10), 3, at(13), id="no_write_time_counts_from_now"),
]


@pytest.mark.parametrize(("r", "claim", "now", "next_look"), LIVE)
def test_a_live_lease_is_not_read_again_before_it_could_expire(r: Run, claim: Claim, now: float,
                                                               next_look: datetime) -> None:
    seen = tracked(r, lease_gone_since=at(1), horizon=7, cleared=True)
    action, t = step(seen, RunLease(claim=claim, read_up_to=9), now)
    assert action == Quiet(until=next_look)
    assert (t.next_look, t.lease_gone_since, t.horizon, t.cleared) == (next_look, None, None, False)


def test_a_gangs_live_lease_keeps_it_in_the_sweeps() -> None:
    action, t = step(tracked(gang(R)), RunLease(claim=live(), read_up_to=0), 3)
    assert (action, t.next_look) == (STAY, at(10))


@pytest.mark.parametrize("claim", [
    pytest.param(Claim(holder="a1", attempt=1, writer="a9"), id="holder_not_its_writer"),
    pytest.param(Claim(holder="a9", attempt=1, writer="a9"), id="current_attempt_by_another_agent"),
    pytest.param(Claim(holder="a9", attempt=2, writer="a9"), id="later_attempt_by_another_agent"),
])
def test_a_foreign_claim_is_taken_away(claim: Claim) -> None:
    assert step(tracked(), RunLease(claim=claim, read_up_to=0), 3)[0] == TakeAway()


def test_an_older_attempts_claim_by_its_own_agent_is_a_live_lease() -> None:
    old = Claim(holder="a9", attempt=1, writer="a9", written_at=at(0), ttl=10)
    assert step(tracked(run(attempt=2)), RunLease(claim=old, read_up_to=0), 3)[0] == Quiet(until=at(10))


LOST = Lose(loss=Loss.LEASE_EXPIRED, reason="lease expired on a1: agent lost")
NOT_STARTED = Lose(loss=Loss.NOT_STARTED, reason="assignment not started in time")
CAP = REPORT_WAIT_CAP.total_seconds()

GONE = [
    pytest.param({}, None, 5, 10, STAY, id="first_seen_gone_waits_for_a_second_look"),
    pytest.param({}, Claim(holder="", attempt=1), 5, 10, STAY, id="a_released_lease_is_gone"),
    pytest.param({"lease_gone_since": at(5)}, None, 5.499999, 10, STAY, id="second_look_too_soon"),
    pytest.param({"lease_gone_since": at(5)}, None, 5.5, 10, AskAgentReports(agent="a1", since=at(5)),
                 id="confirmed_asks_the_agent_about_its_reports"),
    pytest.param({"lease_gone_since": at(5), "cleared": True}, None, 6, 10, NeedHorizon(),
                 id="cleared_needs_the_events_horizon"),
    pytest.param({"lease_gone_since": at(5)}, None, 5 + CAP - 1e-6, 10, AskAgentReports(agent="a1", since=at(5)),
                 id="just_under_the_report_wait_cap"),
    pytest.param({"lease_gone_since": at(5)}, None, 5 + CAP, 10, NeedHorizon(), id="report_wait_cap_reached"),
    pytest.param({"lease_gone_since": at(5), "cleared": True, "horizon": 10}, None, 6, 10, LOST,
                 id="every_report_read_lost"),
    pytest.param({"lease_gone_since": at(5), "cleared": True, "horizon": 10}, None, 6, 9, STAY,
                 id="reports_still_unread"),
    pytest.param({"lease_gone_since": at(5), "cleared": True, "horizon": 0}, None, 6, -1, STAY,
                 id="ack_floor_unknown"),
]


@pytest.mark.parametrize(("facts", "claim", "now", "read_up_to", "action"), GONE)
def test_a_gone_lease(facts: dict[str, Any], claim: Claim | None, now: float, read_up_to: int,
                      action: Action) -> None:
    got, t = step(tracked(**facts), RunLease(claim=claim, read_up_to=read_up_to), now)
    assert got == action
    assert t.lease_gone_since == facts.get("lease_gone_since", at(now))


def test_a_run_without_an_agent_is_not_waited_for() -> None:
    r = run(agent=None)
    assert step(tracked(r, lease_gone_since=at(5)), RunLease(claim=None, read_up_to=0), 6)[0] == NeedHorizon()


def test_an_assignment_whose_lease_is_gone_was_not_started() -> None:
    t = tracked(run(A), lease_gone_since=at(31), cleared=True, horizon=3)
    assert step(t, RunLease(claim=None, read_up_to=3), 32)[0] == NOT_STARTED


@pytest.mark.parametrize(("pending", "horizon", "action"), [
    pytest.param(True, None, Park(), id="reports_pending_parks_it"),
    pytest.param(False, None, NeedHorizon(), id="none_left_needs_the_horizon"),
    pytest.param(False, 4, LOST, id="none_left_and_read_lost"),
    pytest.param(False, 5, STAY, id="none_left_not_yet_read"),
])
def test_agent_reports(pending: bool, horizon: int | None, action: Action) -> None:
    t = tracked(lease_gone_since=at(5), horizon=horizon)
    got, after = step(t, AgentReports(agent="a1", pending=pending, since=at(5), read_up_to=4), 6)
    assert got == action
    assert after.awaiting == (Awaiting(agent="a1", since=at(5)) if pending else None)


@pytest.mark.parametrize(("ended", "action"), [(True, Release()), (False, STAY)], ids=["ended", "still_going"])
def test_a_waiting_run_is_released_when_its_upstream_ends(ended: bool, action: Action) -> None:
    assert step(tracked(run(RunState.WAITING, after="j.prev")), Upstream(ended=ended), 0)[0] == action


def test_a_dead_agents_run_walks_to_lost() -> None:
    # Given a running run whose agent died: its lease expires at 10 s
    t = tracked(next_look=at(10))
    # When the sweeps look at it: the first read finds it gone, and a second look 0.5 s later agrees
    action, t = step(t, Start(), 10)
    assert action == ReadLease()
    action, t = step(t, RunLease(claim=None, read_up_to=0), 10)
    assert (action, t.lease_gone_since) == (STAY, at(10))
    action, t = step(t, Start(), 10.25)
    assert action == STAY
    action, t = step(t, Start(), 10.5)
    assert action == ReadLease()
    action, t = step(t, RunLease(claim=None, read_up_to=0), 10.5)
    # Then its agent is asked whether reports are still to come; it is gone: none will
    assert action == AskAgentReports(agent="a1", since=at(10))
    action, t = step(t, AgentReports(agent="a1", pending=False, since=at(10), read_up_to=0), 10.5)
    # And the events horizon is read after the sweep; once the tracker has read that far, the run is lost
    assert action == NeedHorizon()
    t = with_horizon(t, 42)
    action, t = step(t, Start(), 10.75)
    assert action == ReadLease()
    action, t = step(t, RunLease(claim=None, read_up_to=41), 10.75)
    assert action == AskAgentReports(agent="a1", since=at(10))
    assert step(t, AgentReports(agent="a1", pending=False, since=at(10), read_up_to=41), 10.75)[0] == STAY
    assert step(t, AgentReports(agent="a1", pending=False, since=at(10), read_up_to=42), 10.75)[0] == LOST


# --- liveness per agent: a claim bound to its agent's lease ------------------------------------------------------

def bound(written: float = 0.0, ttl: float = 600.0) -> Claim:
    """Agent a1's claim on the run, bound to its agent lease of nonce n1, written with a long TTL."""
    return Claim(holder="a1", attempt=1, writer="a1", written_at=at(written), ttl=ttl, bound="n1")


def test_a_bound_claim_asks_for_its_agents_lease_before_it_is_judged() -> None:
    action, t = step(tracked(), RunLease(claim=bound(), read_up_to=0), 3)
    assert action == ReadAgentLease(agent="a1", bound="n1")
    assert t.next_look is None  # nothing judged yet


@pytest.mark.parametrize(("agent_until", "now", "next_look"), [
    pytest.param(at(12), 3, at(12), id="alive_until_its_agents_lease_could_expire"),
    pytest.param(at(40), 3, at(13), id="agent_lease_ahead_capped_at_its_ttl_from_now"),
    pytest.param(at(2.5), 3, at(4), id="just_renewed_late_looked_at_within_a_second"),
])
def test_a_bound_claim_lives_by_its_agents_lease(agent_until: datetime, now: float, next_look: datetime) -> None:
    # Its own TTL (600 s) says nothing of liveness: the agent lease's expiry (TTL 10 s) decides the next look
    seen = tracked(lease_gone_since=at(1), horizon=7, cleared=True)
    action, t = step(seen, RunLease(claim=bound(), read_up_to=0, agent=AgentSeen(until=agent_until)), now)
    assert action == Quiet(until=next_look)
    assert (t.next_look, t.lease_gone_since) == (next_look, None)


def test_a_bound_claim_whose_agent_lease_is_gone_walks_to_lost_like_a_lapsed_lease() -> None:
    # Given a running run whose claim (TTL 600 s) is still stored, bound to an agent lease that is gone (its
    # agent died, or came back as another life with a new nonce: _agent_until says None for both)
    t = tracked()
    gone = RunLease(claim=bound(), read_up_to=0, agent=AgentSeen(until=None))
    # When the sweeps look twice, confirm (0.5 s) apart
    action, t = step(t, gone, 10)
    assert (action, t.lease_gone_since) == (STAY, at(10))
    action, t = step(t, RunLease(claim=bound(), read_up_to=0), 10.5)
    assert action == ReadAgentLease(agent="a1", bound="n1")
    action, t = step(t, replace(gone, read_up_to=0), 10.5)
    # Then it takes the same road as a run whose own lease lapsed: reports, then the horizon, then lost
    assert action == AskAgentReports(agent="a1", since=at(10))
    action, t = step(t, AgentReports(agent="a1", pending=False, since=at(10), read_up_to=0), 10.5)
    assert action == NeedHorizon()
    t = with_horizon(t, 3)
    assert step(t, AgentReports(agent="a1", pending=False, since=at(10), read_up_to=3), 10.75)[0] == LOST


def test_a_foreign_bound_claim_is_taken_away_before_any_agent_lease_is_read() -> None:
    claim = Claim(holder="a9", attempt=1, writer="a9", written_at=at(0), ttl=600, bound="n9")
    assert step(tracked(), RunLease(claim=claim, read_up_to=0), 3)[0] == TakeAway()


# --- the record and the indexes -------------------------------------------------------------------------------


def test_a_new_state_or_attempt_forgets_what_was_found_of_the_lease() -> None:
    old = tracked(run(A), looked=at(3), next_look=at(9), lease_gone_since=at(2), horizon=5, cleared=True,
                  awaiting=Awaiting(agent="a1", since=at(2)), gang=GangLooks(attempt=1, looked=at(3)))
    moved = track(old, run(R), 8)
    assert moved == replace(old, run=run(R), revision=8, lease_gone_since=None, horizon=None, cleared=False,
                            awaiting=None)
    retried = track(old, run(A, attempt=2), 9)
    assert retried is not None and retried.lease_gone_since is None
    same = track(old, run(A, reason="waiting for a slot"), 10)
    assert same == replace(old, run=run(A, reason="waiting for a slot"), revision=10)


@pytest.mark.parametrize("r", [None, run(RunState.SUCCEEDED), run(RunState.DEAD)], ids=["deleted", "done", "dead"])
def test_an_ended_run_is_no_longer_tracked(r: Run | None) -> None:
    assert track(tracked(), r, 3) is None


def test_a_new_run_starts_with_nothing_found() -> None:
    assert track(None, run(R), 4) == Tracked(run=run(R), revision=4)


def test_a_waiting_run_is_tracked_without_its_spec_and_history_a_live_one_whole() -> None:
    # A scheduled run (as many as a midnight herd) is kept in the index's form: no spec, no history
    waiting = track(None, run(S, history=[AttemptRecord(attempt=1, outcome="lost")]), 4)
    assert waiting is not None
    assert (waiting.run.spec, waiting.run.history, waiting.queue) == (None, [], "default")
    assert waiting.run == replace(run(S), spec=None)
    # Assigned and running records are kept whole: their reports are written from them
    assert [t.run for t in (track(None, run(A), 5), track(waiting, run(R), 6)) if t is not None] == [run(A), run(R)]


@pytest.mark.parametrize(("r", "until"), [
    pytest.param(run(RunState.RETRY_WAIT, due_at=at(7)), at(7), id="retry_at_its_due_time"),
    pytest.param(run(S, due_at=at(7)), at(37), id="scheduled_at_its_redrive"),
    pytest.param(run(A), at(30), id="assigned_at_its_stall"),
    pytest.param(run(A, due_at=at(500)), at(530), id="staged_at_its_stall_after_due"),
    pytest.param(run(A, assigned_at=None), None, id="assigned_without_time"),
    pytest.param(run(R), None, id="running_every_sweep"),
    pytest.param(gang(A), None, id="gang_every_sweep"),
    pytest.param(run(RunState.WAITING, after="j.prev"), None, id="waiting_every_sweep"),
])
def test_quiet_until(r: Run, until: datetime | None) -> None:
    assert quiet_until(r, TIMING) == until


def test_the_horizon_is_kept_once_and_only_for_a_gone_lease() -> None:
    assert with_horizon(tracked(lease_gone_since=at(1)), 5).horizon == 5
    assert with_horizon(tracked(lease_gone_since=at(1), horizon=3), 5).horizon == 3
    assert with_horizon(tracked(), 5).horizon is None


@pytest.mark.parametrize(("done", "now", "released"), [
    pytest.param(True, 1, True, id="agent_done"),
    pytest.param(False, CAP - 1e-6, False, id="agent_still_reporting"),
    pytest.param(False, CAP, True, id="waited_the_cap"),
])
def test_release(done: bool, now: float, released: bool) -> None:
    parked = tracked(lease_gone_since=at(0), awaiting=Awaiting(agent="a1", since=at(0)))
    got = release(parked, done, at(now))
    assert got == (replace(parked, awaiting=None, cleared=True) if released else None)


# --- an agent's word on its reports ---------------------------------------------------------------------------


def test_a_new_heartbeat_revision_restarts_its_clock() -> None:
    assert beat_seen(None, 4, 10.0) == Beat(4, 10.0)
    assert beat_seen(Beat(4, 10.0), 4, 15.0) == Beat(4, 10.0)
    assert beat_seen(Beat(4, 10.0), 5, 15.0) == Beat(5, 15.0)


@pytest.mark.parametrize(("pending", "now", "may"), [
    pytest.param(3, 16.0, True, id="beating_with_reports"),
    pytest.param(0, 11.0, False, id="nothing_left"),
    pytest.param(3, 16.000001, False, id="record_still_for_three_heartbeats"),
])
def test_may_still_report(pending: int, now: float, may: bool) -> None:
    assert may_still_report(pending, Beat(4, 10.0), now, heartbeat=2.0) is may

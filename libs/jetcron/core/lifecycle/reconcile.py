"""The reconciler's decisions, pure: what one non-terminal run needs next, from its record and what was looked up.

The tracker's reconciler keeps one `Tracked` per active run. Each sweep it calls `judge(tracked, Start(), ...)`;
a verdict either ends the run's turn (`Retry`, `Redrive`, `Lose`, `Release`, `Quiet`, `Park`, `NeedHorizon`,
`Stay`) or asks for one read (`ReadLease`, `ReadAgentLease`, `ReadMemberLease`, `AskAgentIdle`,
`AskAgentReports`, `ReadUpstream`, `TakeAway`), whose answer is judged next as a look. Reads are asked for one at a
time and only when the decision needs them: a live lease is not read before it could lapse, an agent is not asked
about its reports before a lease is seen gone twice, and later gang members are not read once one is lost.
"""

from __future__ import annotations

import sys
from datetime import datetime, timedelta

import msgspec
from msgspec.structs import replace

from jetcron.core.lifecycle.leases import foreign_claim
from jetcron.core.lifecycle.reconcile_steps import (
    STAY,
    Action,
    AgentIdle,
    AgentReports,
    AskAgentIdle,
    AskAgentReports,
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
from jetcron.core.lifecycle.run_state import ACTIVE
from jetcron.core.models import Run, RunState

REPORT_WAIT_CAP = timedelta(seconds=300)
"""The longest a run whose lease is gone waits for its live agent's queued reports before it is called lost: a
run the agent lost track of is re-dispatched at most this much later, however busy that agent stays."""
REDRIVE_GAP_MAX = timedelta(minutes=16)
"""The longest gap between two re-drives of a run left `scheduled`: they come at ages past its due time that double
(30 s, 1, 2, 4, 8, 16 min, then every 16 min). A run waiting for room is held by placement from its record
already; the re-drive is the net for a leader that missed it, and one every 30 s cost each run of a herd that
waits at midnight a write twice a minute."""
HEARTBEATS_TO_GONE = 3
"""Heartbeats an agent's record may stand still before its word on pending reports no longer counts."""


class Timing(msgspec.Struct, frozen=True, kw_only=True):
    """The settings the decisions are timed by, in seconds."""

    lease_ttl: float
    assign_stall: float
    redrive_after: float

    @property
    def redrive_every(self) -> timedelta:
        return timedelta(seconds=self.redrive_after)

    @property
    def confirm(self) -> timedelta:
        """Between the look that finds a lease gone and the one that confirms it. Expiry is judged by the server
        and final (a late renewal fails its revision check), and reports are covered by the horizon rule: the
        second look only guards against acting on one odd read."""
        return timedelta(seconds=min(self.lease_ttl / 4, 0.5))


class Awaiting(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """A run out of the sweeps while its agent says reports are still to go: one may be this run's."""

    agent: str
    since: datetime
    """When its lease was first seen gone."""


class GangLooks(msgspec.Struct, frozen=True, kw_only=True):
    """What the member lease looks of one gang attempt found."""

    attempt: int
    looked: datetime
    """When its member leases were last read."""
    missing: dict[str, datetime] = msgspec.field(default_factory=dict)
    """Member -> when its lease was first seen missing (never changed in place: a new dict on every change)."""


class Tracked(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """One non-terminal run as the reconciler knows it: the record the runs watch delivered (in its `index_form`),
    and what was found."""

    run: Run
    revision: int
    """The revision of `run` in the runs bucket: the tracker's CAS starts from it (when `run` is whole)."""
    queue: str = "default"
    """Its job's queue, which the listing filters by and an index form's record no longer says."""
    looked: datetime | None = None
    """When its lease was last read, or it was last re-driven (both are paced by it)."""
    next_look: datetime | None = None
    """When its live lease could first have expired: no read before then."""
    lease_gone_since: datetime | None = None
    """When its lease was first seen gone (this state and attempt)."""
    horizon: int | None = None
    """The events stream's last sequence, read after its lease was first seen gone (and after the look at its
    agent): once the tracker has read up to there, every report sent before the lease went is in."""
    cleared: bool = False
    """Released from waiting on its agent's reports: the agent has none left (or went), so it is judged."""
    awaiting: Awaiting | None = None
    gang: GangLooks | None = None


class Verdict(msgspec.Struct, frozen=True, kw_only=True):
    tracked: Tracked
    """The record with what this step found."""
    action: Action


def index_form(run: Run) -> Run:
    """The record as the tracker's index keeps it. Whole while it is assigned or running (its agent's reports are
    written from it, with no read), or when it has a deadline (judged from its spec every half second). A run
    waiting for a place, its upstreams or its retry time, as many as a midnight herd, is kept without its spec and
    history: what the sweeps, the listing's filters and the wait timeouts read (about a third of the decoded
    record); what needs the rest reads the record back (`whole` says which form a copy is in)."""
    spec = run.spec
    if (spec is None or run.state in ACTIVE or spec.start_deadline_seconds is not None
            or spec.finish_deadline_seconds is not None):
        return run
    # One string per tenant, not one per run: decoding gives every record its own.
    return replace(run, spec=None, history=[], tenant=sys.intern(run.tenant))


def whole(run: Run) -> bool:
    """Whether the index keeps `run` whole. Every non-terminal record carries its job's spec (only a skipped one
    has none, and those are never tracked), so one without is in the index's form."""
    return run.spec is not None


def same_step(a: Run, b: Run) -> bool:
    """Whether two copies of a run's record stand at the same state and attempt: what one copy found or decided
    still applies to the other (a copy that moved on meanwhile is another step's business)."""
    return (a.state, a.attempt) == (b.state, b.attempt)


def track(old: Tracked | None, run: Run | None, revision: int) -> Tracked | None:
    """A run's record changed (None: deleted). A terminal run is no longer tracked; a new state or attempt makes
    what was found about its lease moot (when it was last looked at, and its gang's looks, still pace it)."""
    if run is None or run.state.terminal:
        return None
    queue = sys.intern(run.spec.queue) if run.spec is not None else "default"
    kept = index_form(run)
    if old is None:
        return Tracked(run=kept, revision=revision, queue=queue)
    if not same_step(old.run, run):
        return replace(old, run=kept, revision=revision, queue=queue, lease_gone_since=None, horizon=None,
                       cleared=False, awaiting=None)
    return replace(old, run=kept, revision=revision, queue=queue)


def stall(run: Run, timing: Timing) -> timedelta:
    """How long an assignment may go unstarted: the stall, plus a staged run's wait for its due time."""
    assert run.assigned_at is not None
    return timedelta(seconds=timing.assign_stall) + max(run.due_at - run.assigned_at, timedelta())


def quiet_until(run: Run, timing: Timing) -> datetime | None:
    """Before this time `judge` does nothing with `run` as it stands (the record changes it, not time): a retry
    waits for its due time, a scheduled run for its re-drive, a single-host assignment for its stall. The rest
    (None: running, gangs, waiting) are looked at every sweep, with their own finer clocks."""
    if len(run.agents) > 1:
        return None
    if run.state is RunState.RETRY_WAIT:
        return run.due_at
    if run.state is RunState.SCHEDULED:
        return run.due_at + timing.redrive_every
    if run.state is RunState.ASSIGNED and run.assigned_at is not None:
        return run.assigned_at + stall(run, timing)
    return None


def judge(tracked: Tracked, look: Look, now: datetime, timing: Timing) -> Verdict:
    """The next step for one run this sweep, after `look`; `tracked.run` is the record as the sweep found it."""
    match look:
        case Start():
            return _first(tracked, now, timing)
        case RunLease():
            return _run_lease(tracked, look, now, timing)
        case MemberLease():
            return _member(tracked, look, now, timing)
        case AgentIdle(idle=idle):
            return _lease_due(tracked, now, timing) if idle else Verdict(tracked=tracked, action=STAY)
        case AgentReports():
            if look.pending:
                parked = replace(tracked, awaiting=Awaiting(agent=look.agent, since=look.since))
                return Verdict(tracked=parked, action=Park())
            return _reports_read(tracked, look.read_up_to)
        case Upstream(ended=ended):
            return Verdict(tracked=tracked, action=Release() if ended else STAY)


def _first(t: Tracked, now: datetime, timing: Timing) -> Verdict:
    run = t.run
    if run.state is RunState.RETRY_WAIT and run.due_at <= now:
        return Verdict(tracked=t, action=Retry())
    if run.state is RunState.SCHEDULED and now - run.due_at > (every := timing.redrive_every):
        if t.looked is not None and now - t.looked <= (gap := max(every, min(t.looked - run.due_at, REDRIVE_GAP_MAX))):
            # Out of the sweeps until its next re-drive: judged every sweep instead, a backlog of 100,000 runs
            # waiting for room cost the tracker a task per run four times a second (bench/longlife.py).
            return Verdict(tracked=t, action=Quiet(until=t.looked + gap))
        return Verdict(tracked=replace(t, looked=now), action=Redrive(times=int((now - run.due_at) / every)))
    if len(run.agents) > 1 and (since := _gang_since(run, timing)) is not None:
        gang = _gang(t)
        if now >= since and (gang is None or now - gang.looked >= timedelta(seconds=timing.lease_ttl / 4)):
            looks = GangLooks(attempt=run.attempt, looked=now, missing=gang.missing if gang else {})
            return Verdict(tracked=replace(t, gang=looks), action=ReadMemberLease(index=1))
    return _after_gang(t, now, timing)


def _gang_since(run: Run, timing: Timing) -> datetime | None:
    """Members take their leases when assigned, so one is judged missing only once an assignment would have
    stalled, or a lease TTL after the gang started."""
    if run.state is RunState.ASSIGNED and run.assigned_at is not None:
        return run.assigned_at + stall(run, timing)
    if run.state is RunState.RUNNING and run.started_at is not None:
        return run.started_at + timedelta(seconds=timing.lease_ttl)
    return None


def _gang(t: Tracked) -> GangLooks | None:
    """The gang looks of the run's current attempt."""
    return t.gang if t.gang is not None and t.gang.attempt == t.run.attempt else None


def _member(t: Tracked, look: MemberLease, now: datetime, timing: Timing) -> Verdict:
    """A member whose lease is missing on two looks TTL/2 apart loses the run: the whole gang is re-dispatched,
    and the other members see the record move on and stop (services/jetcron_services/agent/gang.py)."""
    run = t.run
    agent = run.agents[look.index]
    gang = _gang(t) or GangLooks(attempt=run.attempt, looked=now)
    claim = look.claim
    lost = False
    if claim is not None and claim.holder and claim.attempt == run.attempt:
        if agent in gang.missing:
            gang = replace(gang, missing={a: at for a, at in gang.missing.items() if a != agent})
    else:
        first = gang.missing.get(agent, now)
        if agent not in gang.missing:
            gang = replace(gang, missing={**gang.missing, agent: first})
        lost = now - first >= timedelta(seconds=timing.lease_ttl / 2)
    t = replace(t, gang=gang)
    if lost:
        reason = f"gang member {agent} lost (its lease lapsed): the gang is torn down and re-queued"
        return Verdict(tracked=t, action=Lose(loss=Loss.GANG_MEMBER, reason=reason))
    if look.index + 1 < len(run.agents):
        return Verdict(tracked=t, action=ReadMemberLease(index=look.index + 1))
    return _after_gang(t, now, timing)


def _after_gang(t: Tracked, now: datetime, timing: Timing) -> Verdict:
    """The run's own checks (a gang's too: its first member holds the run lease)."""
    run = t.run
    if run.state is RunState.ASSIGNED and run.assigned_at is not None:
        if now - run.assigned_at <= stall(run, timing):
            return Verdict(tracked=t, action=STAY)
        # The agent first: its answer is cached per sweep, the lease look is a read per run.
        return Verdict(tracked=t, action=AskAgentIdle(agent=run.agent)) if run.agent else _lease_due(t, now, timing)
    if run.state is RunState.RUNNING:
        return _lease_due(t, now, timing)
    if run.state is RunState.WAITING and run.after:
        return Verdict(tracked=t, action=ReadUpstream(run_id=run.after))
    return Verdict(tracked=t, action=STAY)


def _lease_due(t: Tracked, now: datetime, timing: Timing) -> Verdict:
    """A live lease is not read again before it could expire, so a run costs about one read per renewal; a lease
    seen gone is looked at again `confirm` later, then every confirm/2 while reports are pending."""
    first, last = t.lease_gone_since, t.looked
    if first is not None:
        due = first + timing.confirm if last is None or last <= first else last + timing.confirm / 2
    else:
        due = t.next_look if t.next_look is not None else now
    if now < due:
        return Verdict(tracked=t, action=STAY)
    return Verdict(tracked=replace(t, looked=now), action=ReadLease())


def _run_lease(t: Tracked, look: RunLease, now: datetime, timing: Timing) -> Verdict:
    """Gone on two looks `confirm` apart, its agent with no reports left to send (or gone, or waited for long
    enough), and every report sent before that read by the tracker: then the run is lost (progress.py)."""
    run, claim = t.run, look.claim
    if claim is not None and claim.holder:
        if foreign_claim(claim.writer, claim.holder, claim.attempt, run.agent, run.attempt):
            return Verdict(tracked=t, action=TakeAway())
        if claim.bound and look.agent is None:
            return Verdict(tracked=t, action=ReadAgentLease(agent=claim.writer or claim.holder, bound=claim.bound))
        # The server's expiry, but never further ahead than the lease's TTL from our own now: our clock may run
        # behind the server's (a skewed host), and then a dead agent's run would wait the skew too.
        granted = timedelta(seconds=claim.ttl or timing.lease_ttl)
        expires = min((claim.written_at or now) + granted, now + granted)
        alive = look.agent is None or look.agent.until is not None
        if look.agent is not None and look.agent.until is not None:
            # Bound: alive while its agent's lease is, judged as a run lease is (by the agent lease's TTL).
            expires = min(expires, look.agent.until, now + timedelta(seconds=timing.lease_ttl))
        if alive:
            look_at = max(expires, now + timedelta(seconds=min(timing.lease_ttl / 4, 1.0)))
            t = replace(t, lease_gone_since=None, horizon=None, cleared=False, next_look=look_at)
            # A gang is looked at every sweep for its members anyway.
            return Verdict(tracked=t, action=Quiet(until=look_at) if len(run.agents) <= 1 else STAY)
    first = t.lease_gone_since
    if first is None:
        first = now
        t = replace(t, lease_gone_since=now)
    if now - first < timing.confirm:
        return Verdict(tracked=t, action=STAY)
    if not t.cleared and now - first < REPORT_WAIT_CAP and run.agent:
        return Verdict(tracked=t, action=AskAgentReports(agent=run.agent, since=first))
    return _reports_read(t, look.read_up_to)


def _reports_read(t: Tracked, read_up_to: int) -> Verdict:
    """A report sent before the lease went may still be queued for the tracker: lost only once it has read up to
    the horizon (read at the end of the sweep that first got here, after the look at the agent)."""
    if t.horizon is None:
        return Verdict(tracked=t, action=NeedHorizon())
    if read_up_to < t.horizon:
        return Verdict(tracked=t, action=STAY)
    run = t.run
    if run.state is RunState.ASSIGNED:
        return Verdict(tracked=t, action=Lose(loss=Loss.NOT_STARTED, reason="assignment not started in time"))
    return Verdict(tracked=t, action=Lose(loss=Loss.LEASE_EXPIRED, reason=f"lease expired on {run.agent}: agent lost"))


def with_horizon(t: Tracked, horizon: int) -> Tracked:
    """The events stream's last sequence, read after the sweep that asked for it (NeedHorizon)."""
    return replace(t, horizon=horizon) if t.lease_gone_since is not None and t.horizon is None else t


def release(t: Tracked, agent_done: bool, now: datetime) -> Tracked | None:
    """A parked run goes back to the sweeps once its agent has no reports left or is gone (`agent_done`), or
    after REPORT_WAIT_CAP; None: it waits on."""
    if t.awaiting is None or not (agent_done or now - t.awaiting.since >= REPORT_WAIT_CAP):
        return None
    return replace(t, awaiting=None, cleared=True)


class Beat(msgspec.Struct, frozen=True):
    """An agent's heartbeat record as last seen: its revision, and when (the tracker's monotonic clock) that
    revision was first seen."""

    revision: int
    seen_at: float


def beat_seen(last: Beat | None, revision: int, now: float) -> Beat:
    return last if last is not None and last.revision == revision else Beat(revision, now)


def first_sight(read: Beat, watched: Beat | None) -> Beat:
    """The earlier sighting of the same record revision: a watch that delivered it long before a read asked counts
    from then (a record standing still is judged from when it was first seen, not from the question)."""
    return watched if watched is not None and watched.revision == read.revision and \
        watched.seen_at < read.seen_at else read


def may_still_report(pending_reports: int, beat: Beat, now: float, heartbeat: float) -> bool:
    """The agent says reports are queued or in flight, and it is alive: its heartbeat record moved on within the
    last HEARTBEATS_TO_GONE heartbeats, by our clock, not its (a record standing still: gone, whatever it said)."""
    return pending_reports > 0 and not now - beat.seen_at > HEARTBEATS_TO_GONE * heartbeat

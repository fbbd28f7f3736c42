"""An attempt's lifecycle on its agent (jetcron.core.lifecycle.attempt_state), and every attempt, a gang's too, started
by Agent.start."""

from __future__ import annotations

import asyncio
import itertools
from collections import deque
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any, cast

import pytest
from opentelemetry.context import Context as TraceContext
from twin_support import twin_context

from jetcron.bus.consume import Retry
from jetcron.bus.lease import LeaseValue, Stop
from jetcron.bus.memory import MemoryLeaseLog, MemoryMessage, MemoryPublisher
from jetcron.config import Settings
from jetcron.core.clock import ManualClock
from jetcron.core.errors import IllegalTransition, JetcronError, Unavailable
from jetcron.core.host.sim import SimExecution
from jetcron.core.lifecycle.attempt_state import (
    TRANSITIONS,
    AttemptEvent,
    AttemptPhase,
    IllegalAttemptMove,
    advance,
)
from jetcron.core.lifecycle.handoff import DIRECT_REPORTS_MOST
from jetcron.core.lifecycle.run_state import RunEvent
from jetcron.core.lifecycle.runs import Change, apply
from jetcron.core.models import JobSpec, Run, RunState
from jetcron.wire import subjects as s
from jetcron.wire.codec import decode, encode
from jetcron.wire.messages import AssignRun, CancelRun
from jetcron_services.agent import claim as claim_module
from jetcron_services.agent.attempt import Attempt
from jetcron_services.agent.attempt_deps import AttemptDeps
from jetcron_services.agent.gang import GangLeader, GangMember
from jetcron_services.agent.host.offer import HostSetup
from jetcron_services.agent.host.strays import StrayGuard
from jetcron_services.agent.service import Agent
from jetcron_services.runtime import Context

P, E = AttemptPhase, AttemptEvent
T0 = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


# --- the table ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("phase", "event", "to"), [pytest.param(p, e, to, id=f"{p}-{e}")
                                                    for (p, e), to in TRANSITIONS.items()])
def test_every_move_in_the_table_lands_where_it_says(phase: AttemptPhase, event: AttemptEvent,
                                                     to: AttemptPhase) -> None:
    assert advance(phase, event, run_id="r", attempt=1) is to


REFUSED = [(p, e) for p, e in itertools.product(AttemptPhase, AttemptEvent) if (p, e) not in TRANSITIONS]


@pytest.mark.parametrize(("phase", "event"), [pytest.param(p, e, id=f"{p}-{e}") for p, e in REFUSED])
def test_every_move_not_in_the_table_is_refused(phase: AttemptPhase, event: AttemptEvent) -> None:
    with pytest.raises(IllegalAttemptMove, match=f"attempt 2 cannot {event} once {phase}"):
        advance(phase, event, run_id="r", attempt=2)


@pytest.mark.parametrize(("phase", "event"), [
    # its report says how it ended: a drain gives back only what has not
    pytest.param(P.REPORTING, E.HAND_BACK, id="hand_back_once_reporting"),
    pytest.param(P.SUCCEEDED, E.HAND_BACK, id="hand_back_once_succeeded"),
    # the lease is not its own any more: nothing to report, start or give back
    pytest.param(P.FENCED, E.SPAWN, id="spawn_once_fenced"),
    pytest.param(P.FENCED, E.EXIT, id="report_once_fenced"),
    pytest.param(P.FENCED, E.SUCCEED, id="succeed_once_fenced"),
    pytest.param(P.FENCED, E.HAND_BACK, id="hand_back_once_fenced"),
    # a handed-back child's exit is not reported
    pytest.param(P.HANDED_BACK, E.EXIT, id="report_once_handed_back"),
    # only a member whose child succeeded holds its lease for the gang
    pytest.param(P.RUNNING, E.HOLD, id="hold_while_running"),
    pytest.param(P.STAGED, E.SPAWN, id="spawn_before_launch"),
    pytest.param(P.ENDED, E.FENCE, id="fence_once_ended"),
    pytest.param(P.ENDED, E.END, id="end_twice"),
])
def test_refused_moves_name_the_run_the_attempt_and_the_move(phase: AttemptPhase, event: AttemptEvent) -> None:
    with pytest.raises(IllegalAttemptMove) as caught:
        advance(phase, event, run_id="job.2026", attempt=3)
    assert str(caught.value) == f"run job.2026: illegal transition {phase} -> ?: attempt 3 cannot {event} once {phase}"
    assert isinstance(caught.value, IllegalTransition) and isinstance(caught.value, JetcronError)
    assert (caught.value.run_id, caught.value.attempt, caught.value.phase, caught.value.event) == (
        "job.2026", 3, phase, event)


@pytest.mark.parametrize(("events", "last"), [
    pytest.param([E.LAUNCH, E.SPAWN, E.EXIT, E.SUCCEED], P.SUCCEEDED, id="succeeded"),
    pytest.param([E.LAUNCH, E.SPAWN, E.EXIT], P.REPORTING, id="failed_and_reporting"),
    pytest.param([E.LAUNCH, E.EXIT], P.REPORTING, id="could_not_start"),
    pytest.param([E.FENCE], P.FENCED, id="cancelled_while_staged"),
    pytest.param([E.HAND_BACK], P.HANDED_BACK, id="handed_back_while_staged"),
    pytest.param([E.LAUNCH, E.SPAWN, E.HAND_BACK, E.FENCE], P.FENCED, id="lease_lapsed_while_handing_back"),
    pytest.param([E.LAUNCH, E.SPAWN, E.EXIT, E.FENCE], P.FENCED, id="cancelled_while_reporting"),
    pytest.param([E.LAUNCH, E.SPAWN, E.EXIT, E.HOLD, E.HAND_BACK], P.HANDED_BACK, id="member_holding_drained"),
    pytest.param([E.LAUNCH, E.SPAWN, E.EXIT, E.HOLD, E.FENCE], P.FENCED, id="member_holding_fenced"),
])
def test_lives_of_an_attempt(events: list[AttemptEvent], last: AttemptPhase) -> None:
    phase = P.STAGED
    for event in events:
        phase = advance(phase, event, run_id="r", attempt=1)
    assert phase is last
    if phase is not P.STAGED:
        assert advance(phase, E.END, run_id="r", attempt=1) is P.ENDED


def test_every_phase_leads_to_ended_and_ended_to_nothing() -> None:
    reached, todo = {P.STAGED}, deque([P.STAGED])
    while todo:
        phase = todo.popleft()
        for (p, _), to in TRANSITIONS.items():
            if p is phase and to not in reached:
                reached.add(to)
                todo.append(to)
    assert reached == set(AttemptPhase)
    ends = {p for (p, e) in TRANSITIONS if e is E.END}
    # Staged attempts are always launched (run() ends them), so only a launched one ends
    assert ends == set(AttemptPhase) - {P.STAGED, P.ENDED}
    assert not [key for key in TRANSITIONS if key[0] is P.ENDED]


# --- one attempt ---------------------------------------------------------------------------------------------------
# On the bus's twins (jetcron.bus.memory): the leases are the real ones (jetcron.bus.lease.Leases) over the lease log's
# twin, so a release that would not land on the server (a stale token) does not land here either; what was published is
# the publisher twin's record.

class Log(MemoryLeaseLog):
    """The lease log's twin, keeping every write's key and what it said, in order; `on_write` is called while a
    write is in flight (sent, not stored yet): a test acts at that moment."""

    def __init__(self) -> None:
        super().__init__()
        self.written: list[tuple[str, LeaseValue]] = []
        self.on_write: Callable[[], None] | None = None

    async def write(self, key: str, writer: str, data: bytes, ttl: float, expected: int | None) -> int:
        if self.on_write is not None:
            self.on_write()
        revision = await super().write(key, writer, data, ttl, expected)
        self.written.append((key, decode(data, LeaseValue)))
        return revision


def taken(log: Log) -> list[str]:
    """The lease keys a holder wrote its claim to, in the order first taken."""
    return list(dict.fromkeys(key for key, value in log.written if value.holder))


async def released(ctx: Context, log: Log) -> list[str]:
    """Of those, the keys whose stored lease is now a release marker (no holder, not revoked): given up by their
    holder, not left to expire."""
    found = [(key, await ctx.leases.read(key)) for key in taken(log)]
    return [key for key, lease in found if lease is not None and not lease.value.holder and not lease.value.revoked]


def sent(ctx: Context) -> list[str]:
    """The subjects published, in order."""
    return [p.subject for p in cast(MemoryPublisher, ctx.publisher).published]


class _Log:
    def __init__(self) -> None:
        self.lines: list[tuple[str, dict[str, Any]]] = []

    def info(self, event: str, **kw: Any) -> None:
        self.lines.append((event, kw))

    warning = exception = info


def _ctx(**settings: Any) -> tuple[Context, Log]:
    log = Log()
    ctx = twin_context("agent", settings=Settings(**{"agent_sim": True, "run_lease_ttl": 10.0,
                                                     "agent_job_user": "@agent", **settings}),
                       clock=ManualClock(T0), lease_log=log)
    ctx.log = cast(Any, _Log())  # the lines an operator reads ("attempt fenced") are part of what is tested
    return ctx, log


def _cmd(run_id: str = "r", *, due: datetime = T0, gang: list[str] | None = None) -> AssignRun:
    return AssignRun(run_id=run_id, attempt=1, job="j", agent="a", spec=JobSpec(name="j", command=["true"]),
                     scheduled_at=due, due_at=due, gang=gang or [])


async def _attempt(ctx: Context, kind: type[Attempt] = Attempt, *, due: datetime = T0) -> Attempt:
    """An attempt of run r on agent a, holding the run lease it has just taken."""
    lease = await ctx.leases.take(s.run_lease_key("r"), "a", ctx.settings.run_lease_ttl, attempt=1)
    assert lease is not None
    return kind(ctx, AttemptDeps(strays=cast(StrayGuard, None), setup=cast(HostSetup, None)),
                _cmd(due=due, gang=["a", "b"] if kind is not Attempt else None), lease, dict, TraceContext())


async def test_an_attempt_that_runs_and_succeeds_reports_and_leaves_its_lease_to_expire() -> None:
    ctx, log = _ctx()
    attempt = await _attempt(ctx)
    settled: list[int] = []
    await asyncio.wait_for(attempt.run(lambda: settled.append(1)), 5)
    assert (attempt.phase, sent(ctx), await released(ctx, log)) == (P.ENDED, [s.event_subject("finished", "a")], [])
    stored = await ctx.leases.read(s.run_lease_key("r"))  # still as taken: it lapses by its TTL
    assert stored is not None and (stored.token, stored.value.holder) == (attempt.first_token, "a")
    assert settled  # the herd's burst was told it started


async def test_an_attempt_fenced_while_staged_ends_without_starting_reporting_or_releasing() -> None:
    ctx, log = _ctx()
    attempt = await _attempt(ctx, due=T0 + timedelta(hours=1))
    attempt.fence("cancelled")
    attempt.fence("cancelled again")  # fencing again changes nothing
    await asyncio.wait_for(attempt.run(), 5)  # and it does not wait for its due time
    assert (attempt.phase, attempt.started_at, sent(ctx), await released(ctx, log)) == (P.ENDED, None, [], [])
    assert [key for key, _ in log.written] == [s.run_lease_key("r")]  # the take, and nothing written since
    lines = cast(_Log, ctx.log).lines
    assert [(e, kw["reason"], kw["phase"]) for e, kw in lines] == [("attempt fenced", "cancelled", "staged")]


async def test_an_attempt_handed_back_while_staged_releases_its_lease_then_gives_the_run_back() -> None:
    ctx, log = _ctx()
    attempt = await _attempt(ctx, due=T0 + timedelta(hours=1))
    await attempt.hand_back("agent draining")
    await asyncio.wait_for(attempt.run(), 5)
    assert (attempt.phase, attempt.started_at, await released(ctx, log)) == (P.ENDED, None, ["run.r"])
    assert sent(ctx) == [s.event_subject("handed_back", "a")]


async def test_a_drain_does_not_hand_back_an_attempt_whose_child_has_ended() -> None:
    ctx, _ = _ctx()
    attempt = await _attempt(ctx)
    for event in (E.LAUNCH, E.SPAWN, E.EXIT):
        attempt._apply(event)
    await attempt.hand_back("agent draining")  # refused: its report says how it ended
    assert (attempt.phase, attempt.why, sent(ctx)) == (P.REPORTING, None, [])


async def test_a_gang_member_holding_its_lease_stops_holding_it_when_fenced() -> None:
    # Given a member whose child exited 0: it holds its member lease while the gang runs on
    ctx, log = _ctx()
    member = await _attempt(ctx, GangMember)
    task = asyncio.create_task(member.run())
    for _ in range(20):
        await asyncio.sleep(0)
    assert member.phase is P.HOLDING and not task.done()
    # When it is fenced (its lease taken by a newer attempt of the gang)
    member.fence("superseded by attempt 2")
    # Then it ends, reporting nothing and leaving the lease to its new holder
    await asyncio.wait_for(task, 5)
    assert (member.phase, sent(ctx), await released(ctx, log)) == (P.ENDED, [], [])


async def test_a_gang_member_that_sees_its_attempt_preempted_in_the_record_stops_with_the_grace() -> None:
    # Given a member running (sim, a minute), the record at its attempt; the record watch every TTL/3 = 0.5 s
    ctx, _ = _ctx(run_lease_ttl=1.5)
    lease = await ctx.leases.take(s.run_lease_key("r"), "a", ctx.settings.run_lease_ttl, attempt=1)
    assert lease is not None
    record = Run(run_id="r", job="j", state=RunState.RUNNING, attempt=1, scheduled_at=T0, due_at=T0, created_at=T0,
                 spec=JobSpec(name="j", command=["true"]), agent="a", agents=["a", "b"], token=lease.token)
    await ctx.runs.create("r", record)
    member = GangMember(ctx, AttemptDeps(strays=cast(StrayGuard, None), setup=cast(HostSetup, None),
                                         sim=SimExecution(a=60.0)), _cmd(gang=["b", "a"]), lease, dict, TraceContext())
    task = asyncio.create_task(member.run())
    # When placement preempts it with a 5 s grace, and the record is all the member sees of it (no message came)
    await ctx.runs.put("r", apply(record, Change(event=RunEvent.PREEMPT, delay_seconds=5.0), T0))
    # Then its watch stops it as the control message would have: SIGTERM first, the grace left (the clock at T0)
    await asyncio.wait_for(task, 5)
    assert (member.phase, member.graceful, member.grace_seconds, member.why) == (
        P.ENDED, True, 5.0, "gang attempt 1 is over (run scheduled, attempt 2)")
    assert sent(ctx) == []  # and it reports nothing: the attempt is the record's to close


# --- the agent: every attempt starts through Agent.start --------------------------------------------------------

async def _agent(**settings: Any) -> tuple[Agent, Log]:
    """Agent a, holding its own lease as its start takes it before any assignment; the lease log then starts
    empty, so that a test sees the writes it caused."""
    ctx, log = _ctx(**settings)
    setup = cast(HostSetup, SimpleNamespace(gpus=(0, None, []), runtime=None))
    agent = Agent(ctx, "a", setup)
    assert await agent.liveness.take()
    log.written.clear()
    return agent, log


def _msg(message: Any) -> Any:
    return MemoryMessage(s.assign_subject("a"), encode(message))


def _spy_on_start(agent: Agent, held: list[bool] | None = None) -> list[Attempt]:
    """The attempts started, in order; `held` gets, for each, whether the agent counted it as its own once
    started (a sim attempt may have ended by the time the test looks)."""
    started: list[Attempt] = []
    start = agent.start

    async def spy(attempt: Attempt) -> None:
        started.append(attempt)
        await start(attempt)
        if held is not None:
            held.append(agent.attempts.get(attempt.cmd.run_id) is attempt)
    agent.start = spy  # type: ignore[method-assign]
    return started


async def _settle(agent: Agent) -> None:
    for _ in range(50):
        await asyncio.sleep(0)
    await asyncio.wait_for(asyncio.gather(*agent._tasks), 5)


async def test_a_gang_member_waits_for_a_free_slot_and_starts_through_agent_start() -> None:
    # Given an agent with one slot, taken by an attempt staged an hour ahead
    agent, log = await _agent(agent_slots=1)
    held: list[bool] = []
    started = _spy_on_start(agent, held)
    await agent.take(_msg(_cmd("staged", due=T0 + timedelta(hours=1))))
    assert [a.cmd.run_id for a in started] == ["staged"] and "staged" in agent.waiting

    # When a gang's assignment comes, this agent its leader
    gang = asyncio.create_task(agent.take(_msg(_cmd("g", gang=["a", "b"]))))
    for _ in range(20):
        await asyncio.sleep(0)

    # Then it waits for the slot, its lease not taken yet
    assert not gang.done() and taken(log) == ["run.staged"]

    # And once the staged attempt is cancelled (its slot freed), the gang's leader takes the run lease and starts
    await agent.on_control(_msg(CancelRun(run_id="staged", attempt=1, reason="cancelled")))
    await asyncio.wait_for(gang, 5)
    assert taken(log) == ["run.staged", "run.g"]
    assert [type(a) for a in started] == [Attempt, GangLeader]
    assert held == [True, True]

    # And it runs (sim) and reports for the gang; every slot is free again once both have ended
    await _settle(agent)
    assert [a.phase for a in started] == [P.ENDED, P.ENDED]
    assert sent(agent.ctx) == [s.event_subject("finished", "a")]
    assert (agent.attempts, agent.slots._value) == ({}, 1)


async def test_a_draining_agent_takes_no_gang_member() -> None:
    agent, log = await _agent()
    agent.draining = True
    with pytest.raises(Retry, match="agent draining"):
        await agent.take(_msg(_cmd("g", gang=["b", "a"])))
    assert (log.written, agent.attempts, agent.slots._value) == ([], {}, agent.ctx.settings.agent_slots)


async def test_a_gang_member_whose_lease_was_taken_as_the_drain_began_is_handed_back_at_once() -> None:
    # Given the agent starts draining while a gang member's lease write is in flight
    agent, log = await _agent()
    started = _spy_on_start(agent)
    log.on_write = lambda: setattr(agent, "draining", True)
    await agent.take(_msg(_cmd("g", gang=["a", "b"])))
    log.on_write = None

    # Then the member, started through Agent.start, is handed back without starting: lease released, run given back
    await _settle(agent)
    assert [(type(a), a.phase, a.started_at) for a in started] == [(GangLeader, P.ENDED, None)]
    assert (await released(agent.ctx, log), sent(agent.ctx)) == (["run.g"], [s.event_subject("handed_back", "a")])
    assert agent.slots._value == agent.ctx.settings.agent_slots


# --- liveness per agent: run claims bound to the agent's own lease ----------------------------------------------

async def _staged(agent: Agent, *run_ids: str) -> list[Attempt]:
    """Attempts of the given runs taken by `agent`, each staged an hour ahead (holding its slot and its claim)."""
    started = _spy_on_start(agent)
    for run_id in run_ids:
        await agent.take(_msg(_cmd(run_id, due=T0 + timedelta(hours=1))))
    assert [a.cmd.run_id for a in started] == list(run_ids)
    return started


async def test_a_run_claim_is_bound_to_the_agent_lease_and_renewed_only_at_a_third_of_its_own_long_ttl() -> None:
    agent, log = await _agent(run_claim_ttl=600.0)
    [attempt] = await _staged(agent, "r1")
    stored = await agent.ctx.leases.read(s.run_lease_key("r1"))
    assert stored is not None and stored.value.bound == agent.liveness.nonce != ""
    # Its liveness is the agent lease's: its own TTL is the long one, first renewed (from its due time, an hour
    # ahead) a third of that TTL on, where a claim of its own would be renewed every 10 s / 3
    assert (attempt.claim.bound, attempt.claim.ttl, log.ttl_of(s.run_lease_key("r1"))) == (
        agent.liveness.nonce, 600.0, 3600.0 + 600.0)
    assert attempt.keeper_delay() > 3600 + 600 / 3 - 5


async def test_losing_the_agent_lease_fences_every_attempt_bound_to_it_and_the_next_life_takes_it_afresh() -> None:
    # Given two attempts staged on agent a, both bound to its lease
    agent, log = await _agent()
    first_nonce = agent.liveness.nonce
    attempts = await _staged(agent, "r1", "r2")
    # When its lease lapses (a pause past its TTL: the server expired it) and the next renewal finds it gone
    log.expire(s.agent_lease_key("a"))
    await agent.liveness.renew()
    # Then both attempts are fenced, end without starting or reporting, and give their slots back
    await _settle(agent)
    assert [(a.phase, a.started_at, a.why) for a in attempts] == [
        (P.ENDED, None, "agent lease lost (expired, or taken by another life of this agent)")] * 2
    assert sent(agent.ctx) == [] and agent.slots._value == agent.ctx.settings.agent_slots
    lines = cast(_Log, agent.ctx.log).lines
    assert ("agent lease lost: its attempts are stopped", {
        "agent": "a", "reason": "agent lease lost (expired, or taken by another life of this agent)"}) in lines
    # And no assignment is taken until the lease is held again, then under a new nonce
    assert agent.liveness.nonce == ""
    with pytest.raises(Retry, match="agent lease not held"):
        await agent.take(_msg(_cmd("r3")))
    assert await agent.liveness.take() and agent.liveness.nonce not in ("", first_nonce)


async def test_a_stop_notice_on_the_agent_lease_stops_its_attempt_with_grace_when_the_control_message_was_lost(
        ) -> None:
    # Given two attempts staged on agent a
    agent, _ = await _agent()
    kept, cancelled = await _staged(agent, "keep", "gone")
    # When a cancel of one is notified on the agent's lease (its control message never came)
    stop = Stop(run_id="gone", attempt=1, reason="cancelled by test", at=T0.timestamp())
    assert await agent.ctx.leases.notify_stops("a", stop, 30.0)
    await agent.liveness.renew()
    # Then that attempt alone is stopped as a cancel stops it (with grace), and the lease is held on
    await _settle(agent)
    assert (cancelled.phase, cancelled.why, cancelled.graceful) == (P.ENDED, "cancelled by test", True)
    assert kept.phase is P.STAGED and "keep" in agent.waiting
    assert agent.liveness.nonce != ""
    # And a stop for an attempt the agent no longer holds (an older one) changes nothing
    assert await agent.ctx.leases.notify_stops("a", Stop(run_id="keep", attempt=7, reason="old"), 30.0)
    await agent.liveness.renew()
    assert kept.phase is P.STAGED


def _fail_first_write(log: Log) -> None:
    """The lease log's next write fails, as one does while the storage does not answer."""
    failures = iter([Unavailable("storage did not answer")])

    def fail_once() -> None:
        if (failure := next(failures, None)) is not None:
            raise failure

    log.on_write = fail_once


async def test_a_bound_claims_release_is_tried_again_until_it_lands(monkeypatch: pytest.MonkeyPatch) -> None:
    # Given an attempt staged on agent a, handed back (a drain) while the storage does not answer its first write
    monkeypatch.setattr(claim_module, "RELEASE_RETRY", 0.0)
    agent, log = await _agent()
    [attempt] = await _staged(agent, "r1")
    _fail_first_write(log)
    assert agent.waiting.take_back("r1") is attempt
    await attempt.hand_back("agent draining")
    agent._launch(attempt)
    await _settle(agent)
    # Then the bound claim (it would live as long as the agent) is released on the next try, before the run is
    # given back
    assert [key for key, value in log.written if not value.holder] == ["run.r1"]
    assert (await released(agent.ctx, log)) == ["run.r1"]
    assert sent(agent.ctx) == [s.event_subject("handed_back", "a")]


async def test_a_claim_of_its_own_whose_release_fails_is_left_to_lapse() -> None:
    # Given an attempt holding a claim of its own (a gang member's is: renewed every TTL/3, bound to no agent lease),
    # handed back while staged and the storage does not answer its first write
    ctx, log = _ctx()
    attempt = await _attempt(ctx, due=T0 + timedelta(hours=1))
    assert attempt.claim.bound == ""
    _fail_first_write(log)
    await attempt.hand_back("agent draining")
    await asyncio.wait_for(attempt.run(), 5)
    # Then its release is tried once and left to lapse within its TTL, and the run is given back
    assert [key for key, value in log.written if not value.holder] == []
    assert (await released(ctx, log)) == []
    assert sent(ctx) == [s.event_subject("handed_back", "a")]


class _Trackers:
    """Serves the direct finish reports on ctx.rpc, answering each with `answer`; what it got, by subject."""

    def __init__(self, answer: bytes) -> None:
        self.answer = answer
        self.got: list[str] = []

    async def on_report(self, msg: Any) -> None:
        self.got.append(msg.subject)
        await msg.respond(self.answer)


async def _direct_attempt(answer: bytes, *, in_flight: int = 0) -> tuple[Context, Attempt, _Trackers, Log]:
    """An attempt whose finish report goes to the trackers directly, `in_flight` of the agent's reports already
    waiting in its window."""
    from jetcron.bus.direct import Direct
    from jetcron_services.agent.reports import FinishBatches, ReportWindow

    ctx, log = _ctx()
    trackers = _Trackers(answer)
    await ctx.rpc.serve(s.REPORT_ALL, trackers.on_report, queue="run_tracker")
    lease = await ctx.leases.take(s.run_lease_key("r"), "a", ctx.settings.run_lease_ttl, attempt=1)
    assert lease is not None
    window = ReportWindow(64, hold=0.0)
    window._queued = in_flight
    deps = AttemptDeps(strays=cast(StrayGuard, None), setup=cast(HostSetup, None), reports=window,
                       finishes=FinishBatches(Direct(ctx.rpc, "report", timeout=5), "a", most=1, flying=16))
    return ctx, Attempt(ctx, deps, _cmd(), lease, dict, TraceContext()), trackers, log


async def test_a_finish_the_trackers_take_directly_is_not_published() -> None:
    from jetcron.wire.messages import HANDOFF_TAKEN
    ctx, attempt, trackers, _ = await _direct_attempt(HANDOFF_TAKEN)
    await asyncio.wait_for(attempt.run(None), 5)
    assert (attempt.phase, trackers.got, sent(ctx)) == (P.ENDED, [s.report_subject("finished", "a")], [])


async def test_a_finish_the_trackers_refuse_is_published_to_the_stream() -> None:
    from jetcron.wire.messages import HANDOFF_REFUSED
    ctx, attempt, trackers, _ = await _direct_attempt(HANDOFF_REFUSED)
    await asyncio.wait_for(attempt.run(None), 5)
    assert (attempt.phase, len(trackers.got), sent(ctx)) == (P.ENDED, 1, [s.event_subject("finished", "a")])


async def test_with_many_reports_in_flight_a_finish_goes_to_the_stream_without_asking() -> None:
    from jetcron.wire.messages import HANDOFF_TAKEN
    ctx, attempt, trackers, _ = await _direct_attempt(HANDOFF_TAKEN, in_flight=DIRECT_REPORTS_MOST)
    await asyncio.wait_for(attempt.run(None), 5)
    assert (attempt.phase, trackers.got, sent(ctx)) == (P.ENDED, [], [s.event_subject("finished", "a")])

"""Agents lost: the tracker's leader counts an agent whose entry aged out once (jetcron.core.lifecycle.departures),
never one that left cleanly, nor one whose record the watch merely stopped delivering
(jetcron_services.run_tracker.agents)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import msgspec
import pytest
from prometheus_client import REGISTRY
from twin_support import twin_context

from jetcron.bus.memory import MemoryRecords
from jetcron.config import Settings
from jetcron.core.lifecycle.departures import Found, judge, lapsed_with, standing_still
from jetcron.core.lifecycle.reconcile import Beat
from jetcron.core.lifecycle.retry import RetryAction, RetryDecision
from jetcron.core.lifecycle.run_state import RunEvent, RunState
from jetcron.core.lifecycle.runs import Change, apply
from jetcron.core.models import AgentInfo, Run
from jetcron_services.run_tracker.agents import AgentLosses

AGE = 30.0
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def test_agents_standing_still_past_the_entry_age_are_looked_up() -> None:
    beats = {"a": Beat(3, 100.0), "b": Beat(4, 69.0), "c": Beat(5, 71.0)}
    assert standing_still(beats, 100.0, AGE) == ["b"]


@pytest.mark.parametrize(("found", "verdict"), [(None, Found.LOST), (3, Found.WAIT), (9, Found.ALIVE)])
def test_the_look_up_decides(found: int | None, verdict: Found) -> None:
    assert judge(Beat(3, 0.0), found) is verdict


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _info(agent: str) -> AgentInfo:
    t = datetime(2026, 1, 1, tzinfo=UTC)
    return AgentInfo(agent_id=agent, cpu=1, memory_mb=512, heartbeat_at=t, started_at=t)


async def _settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_an_agent_that_dies_is_counted_once_and_one_that_stops_cleanly_never() -> None:
    ctx = twin_context("run_tracker", settings=Settings(agent_entry_seconds=AGE))
    agents = ctx.agents
    assert isinstance(agents, MemoryRecords)
    clock = Clock()
    losses = AgentLosses(ctx, clock)
    watch = asyncio.create_task(losses.watch())
    try:
        for agent in ("dies", "stops", "lives"):
            await agents.put(agent, _info(agent))
        await _settle()
        assert set(losses.beats) == {"dies", "stops", "lives"}
        before = REGISTRY.get_sample_value("jetcron_agents_lost_total") or 0.0

        clock.now += 10
        await agents.put("lives", _info("lives"))  # heartbeats on
        await agents.delete("stops")  # drained and deleted its entry: a clean exit
        await _settle()
        clock.now += AGE
        assert await losses.check(leading=True) == 0  # "dies" still has its entry: not aged out yet
        del agents._last["dies"]  # the server ages the entry out: no event reaches a watch
        await agents.put("lives", _info("lives"))
        await _settle()
        assert await losses.check(leading=True) == 1
        assert await losses.check(leading=True) == 0  # once
        assert REGISTRY.get_sample_value("jetcron_agents_lost_total") == before + 1
        assert REGISTRY.get_sample_value("jetcron_agents_alive") == 1
        assert set(losses.beats) == {"lives"}
    finally:
        watch.cancel()


async def test_a_record_the_watch_did_not_deliver_is_found_alive_not_lost() -> None:
    ctx = twin_context("run_tracker", settings=Settings(agent_entry_seconds=AGE))
    clock = Clock()
    losses = AgentLosses(ctx, clock)
    revision = await ctx.agents.put("a", _info("a"))
    losses.beats["a"] = Beat(revision, clock.now)
    await ctx.agents.put("a", _info("a"))  # a heartbeat the (stalled) watch never delivered
    clock.now += AGE + 1
    assert await losses.check(leading=True) == 0
    assert losses.beats["a"] == Beat(revision + 1, clock.now)


async def test_a_standby_forgets_agents_standing_still_without_counting_them() -> None:
    ctx = twin_context("run_tracker", settings=Settings(agent_entry_seconds=AGE))
    clock = Clock()
    losses = AgentLosses(ctx, clock)
    losses.beats["a"] = Beat(1, clock.now)
    clock.now += AGE + 1
    assert await losses.check(leading=False) == 0
    assert losses.beats == {}


def _running(agents: tuple[str, ...] = ("a",)) -> Run:
    return Run(run_id="j.20260101T000000000Z", job="j", state=RunState.RUNNING, scheduled_at=T0, due_at=T0,
               created_at=T0, agent=agents[0], agents=list(agents), token=7, started_at=T0)


def _lost(before: Run, retry: RetryAction = RetryAction.RETRY, delay: float = 0.0) -> Run:
    """The record after the tracker calls the attempt lost (jetcron.core.lifecycle.runs.apply, as the tracker writes
    it)."""
    return apply(before, Change(event=RunEvent.LOSE, reason="lease expired on a: agent lost",
                                retry=RetryDecision(action=retry, delay_seconds=delay)), T0)


@pytest.mark.parametrize(("retry", "delay"), [(RetryAction.RETRY, 0.0), (RetryAction.RETRY, 30.0),
                                              (RetryAction.DEAD, 0.0)])
def test_a_run_lost_while_running_names_its_agent_whatever_comes_next(retry: RetryAction, delay: float) -> None:
    before = _running()
    assert lapsed_with(before, _lost(before, retry, delay)) == "a"


def test_nothing_else_names_an_agent() -> None:
    before = _running()
    lost = _lost(before)
    # a record first read already re-dispatched, a run not seen running, a record gone
    assert lapsed_with(None, lost) is None
    assert lapsed_with(msgspec.structs.replace(before, state=RunState.ASSIGNED), lost) is None
    assert lapsed_with(before, None) is None
    # a run that ended, failed or was handed back there
    ended = apply(before, Change(event=RunEvent.SUCCEED, attempt=1, token=7, agent="a", exit_code=0), T0)
    assert lapsed_with(before, ended) is None
    failed = apply(before, Change(event=RunEvent.FAIL, attempt=1, token=7, agent="a", exit_code=1,
                                  retry=RetryDecision(action=RetryAction.RETRY)), T0)
    assert lapsed_with(before, failed) is None
    handed = apply(before, Change(event=RunEvent.HAND_BACK, attempt=1, token=7, agent="a"), T0)
    assert lapsed_with(before, handed) is None
    # a gang's loss (it may be another member's), and the same record again
    gang = _running(("a", "b"))
    assert lapsed_with(gang, _lost(gang)) is None
    assert lapsed_with(lost, lost) is None

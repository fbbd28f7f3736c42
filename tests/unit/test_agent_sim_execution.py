"""The simulated executor (agent_sim): durations and exit codes drawn per attempt, and a simulated attempt is stopped,
timed out and reported as a real one is (the virtual fleet's agents run nothing else)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import cast

import pytest
from opentelemetry.context import Context as TraceContext
from pydantic import ValidationError
from twin_support import twin_context

from jetcron.bus.memory import MemoryLeaseLog, MemoryPublisher
from jetcron.config import Settings
from jetcron.core.errors import Misconfigured
from jetcron.core.host.sim import SimExecution
from jetcron.core.lifecycle.attempt_state import AttemptPhase
from jetcron.core.models import JobSpec
from jetcron.wire import subjects as s
from jetcron.wire.codec import decode
from jetcron.wire.messages import AssignRun, RunFinished
from jetcron_services.agent.attempt import Attempt
from jetcron_services.agent.attempt_deps import AttemptDeps
from jetcron_services.agent.host.offer import HostSetup
from jetcron_services.agent.host.strays import StrayGuard
from jetcron_services.runtime import Context

T0 = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
P = AttemptPhase


def test_text_forms_parse_to_their_distribution_and_mix() -> None:
    assert SimExecution.parse("3") == SimExecution("fixed", 3.0, 0.0, ((0, 1.0),))
    assert SimExecution.parse("uniform:0.5,2", "0:95,1:5") == SimExecution("uniform", 0.5, 2.0, ((0, 95.0), (1, 5.0)))
    assert SimExecution.parse("exp:4,30", "0,7") == SimExecution("exp", 4.0, 30.0, ((0, 1.0), (7, 1.0)))


@pytest.mark.parametrize(("duration", "codes", "error"), [
    ("gauss:1", "0", "simulated duration 'gauss': one of fixed, uniform, exp"),
    ("uniform:3,1", "0", "simulated duration uniform:3.0,1.0: seconds >= 0, a <= b"),
    ("uniform:1,2,3", "0", "simulated duration 'uniform:1,2,3': at most two numbers"),
    ("1", "0:0", r"simulated exit codes \(\(0, 0.0\),\): weights >= 0, at least one > 0"),
    ("1", "x", "simulated execution '1' / 'x'"),
])
def test_a_bad_text_form_is_refused_naming_it(duration: str, codes: str, error: str) -> None:
    with pytest.raises(Misconfigured, match=error):
        SimExecution.parse(duration, codes)


def test_draws_are_the_attempts_own_within_bounds_and_follow_the_mix() -> None:
    sim = SimExecution.parse("uniform:0.5,2", "0:90,3:10")
    draws = [sim.draw(f"job.{i}", 1) for i in range(2000)]
    assert draws == [sim.draw(f"job.{i}", 1) for i in range(2000)]  # the same attempt, the same draw, anywhere
    assert sim.draw("job.0", 2) != draws[0]  # a retry is a draw of its own
    assert all(0.5 <= seconds <= 2.0 for seconds, _ in draws)
    codes = [code for _, code in draws]
    assert set(codes) == {0, 3} and 0.07 < codes.count(3) / len(codes) < 0.13
    capped = SimExecution.parse("exp:5,6")
    assert max(capped.draw(f"job.{i}", 1)[0] for i in range(500)) == 6.0  # the tail cut at the cap


def test_the_default_is_what_agent_sim_always_did_no_time_and_exit_0() -> None:
    assert SimExecution().draw("job.1", 1) == (0.0, 0)


def _ctx() -> Context:
    return twin_context("agent", settings=Settings(agent_sim=True, run_lease_ttl=10.0, agent_job_user="@agent"),
                        lease_log=MemoryLeaseLog())


async def _attempt(ctx: Context, sim: SimExecution, timeout: float | None = None) -> Attempt:
    lease = await ctx.leases.take(s.run_lease_key("r"), "a", ctx.settings.run_lease_ttl, attempt=1)
    assert lease is not None
    cmd = AssignRun(run_id="r", attempt=1, job="j", agent="a", scheduled_at=T0, due_at=T0,
                    spec=JobSpec(name="j", command=["true"], timeout_seconds=timeout))
    deps = AttemptDeps(strays=cast(StrayGuard, None), setup=cast(HostSetup, None), sim=sim)
    return Attempt(ctx, deps, cmd, lease, dict, TraceContext())


def _finished(ctx: Context) -> list[RunFinished]:
    return [decode(p.data, RunFinished) for p in cast(MemoryPublisher, ctx.publisher).published
            if p.subject == s.event_subject("finished", "a")]


async def test_a_drawn_exit_code_other_than_0_is_reported_as_a_failure_with_that_code() -> None:
    ctx = _ctx()
    attempt = await _attempt(ctx, SimExecution.parse("0", "7"))
    await asyncio.wait_for(attempt.run(), 5)
    [report] = _finished(ctx)
    assert (report.outcome, report.exit_code, report.reason, attempt.phase) == ("failed", 7, "exit code 7", P.ENDED)


async def test_a_simulated_attempt_fenced_while_it_runs_ends_at_once_and_reports_nothing() -> None:
    ctx = _ctx()
    attempt = await _attempt(ctx, SimExecution.parse("3600"))
    task = asyncio.create_task(attempt.run())
    while attempt.phase is not P.RUNNING:
        await asyncio.sleep(0)
    attempt.fence("lease taken (cancelled or re-dispatched)")
    await asyncio.wait_for(task, 5)  # not an hour: the fence stops it as it kills a child
    assert (attempt.phase, _finished(ctx)) == (P.ENDED, [])


async def test_a_simulated_attempt_longer_than_its_timeout_is_reported_timed_out() -> None:
    ctx = _ctx()
    attempt = await _attempt(ctx, SimExecution.parse("3600"), timeout=0.01)
    await asyncio.wait_for(attempt.run(), 5)
    [report] = _finished(ctx)
    assert (report.outcome, report.exit_code, report.reason) == ("timed_out", None, "timed out after 0.01s")


def test_a_real_agent_takes_its_simulation_from_its_settings() -> None:
    settings = Settings(agent_sim=True, agent_sim_seconds="uniform:1,2", agent_sim_exit_codes="0:9,1:1")
    assert settings.agent_sim_execution == SimExecution("uniform", 1.0, 2.0, ((0, 9.0), (1, 1.0)))
    assert Settings().agent_sim_execution == SimExecution()  # no time, exit 0: as agent_sim always did


@pytest.mark.parametrize(("seconds", "codes", "why"), [
    ("nope:1", "0", "simulated duration 'nope': one of fixed, uniform, exp"),
    ("uniform:2,1", "0", "simulated duration uniform:2.0,1.0: seconds >= 0, a <= b"),
    ("1", "zero", "simulated execution '1' / 'zero': invalid literal for int() with base 10: 'zero'"),
])
def test_a_malformed_simulation_stops_the_start_naming_both_settings(seconds: str, codes: str, why: str) -> None:
    with pytest.raises(ValidationError) as refused:
        Settings(agent_sim_seconds=seconds, agent_sim_exit_codes=codes)
    assert (f"JETCRON_AGENT_SIM_SECONDS={seconds!r}, JETCRON_AGENT_SIM_EXIT_CODES={codes!r}: {why}"
            in str(refused.value))

"""A preempted attempt on its agent: stopped with its own grace period, which nothing cuts short (it may be saving
the checkpoint the next attempt loads), and an attempt given the same GPU devices (or the same run's next one)
spawns only once it has ended."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from opentelemetry.context import Context as TraceContext
from test_attempt_lifecycle import _agent, _attempt, _ctx, _msg

from jetcron.bus.lease import Lease, LeaseValue
from jetcron.core.lifecycle.attempt_state import AttemptEvent, AttemptPhase
from jetcron.core.models import JobSpec
from jetcron.wire.messages import AssignRun, CancelRun
from jetcron_services.agent.attempt import Attempt
from jetcron_services.agent.host.executor import Execution

P, E = AttemptPhase, AttemptEvent


class _Child:
    """An Execution's stand-in: what the attempt asked of it."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, float | None]] = []

    def stop(self, reason: str, grace: float | None = None) -> None:
        self.calls.append(("stop", reason, grace))

    def kill_now(self, reason: str) -> None:
        self.calls.append(("kill", reason, None))


async def _running_attempt(**kw: Any) -> tuple[Attempt, _Child]:
    ctx, _ = _ctx()
    attempt = await _attempt(ctx, **kw)
    for event in (E.LAUNCH, E.SPAWN):
        attempt._apply(event)
    child = _Child()
    attempt.child.execution = child  # type: ignore[assignment]
    return attempt, child


async def test_a_graceful_stop_is_not_cut_short_by_a_later_fence() -> None:
    # Given an attempt preempted with a 30 s grace
    attempt, child = await _running_attempt()
    attempt.fence("preempted by run u (high)", grace=True, grace_seconds=30)
    # When its lease renewal would find the lease revoked, or the run's next attempt supersedes it here
    attempt.fence("lease taken (cancelled or re-dispatched)")
    attempt.fence("superseded by attempt 2")
    # Then its child was stopped once, with SIGTERM and the preemption's grace, and is not killed early
    assert child.calls == [("stop", "preempted by run u (high)", 30)]
    assert (attempt.phase, attempt.graceful, attempt.stopping) == (P.FENCED, True, True)
    # And its lease keeper renews nothing more (a renewal finding the lease revoked would kill it)
    assert attempt._renewals_over


async def test_a_fence_without_grace_kills_at_once_and_again() -> None:
    attempt, child = await _running_attempt()
    attempt.fence("lease taken (cancelled or re-dispatched)")
    attempt.fence("lease not renewed")
    assert child.calls == [("kill", "lease taken (cancelled or re-dispatched)", None), ("kill", "lease not renewed",
                                                                                       None)]


async def test_the_control_message_carries_the_preemptions_grace() -> None:
    agent, _ = await _agent()
    attempt, child = await _running_attempt()
    agent.attempts["r"] = attempt
    await agent.on_control(_msg(CancelRun(run_id="r", attempt=1, reason="preempted", grace_seconds=12.5)))
    assert child.calls == [("stop", "preempted", 12.5)]
    await agent.on_control(_msg(CancelRun(run_id="r", attempt=1, reason="cancelled")))  # a cancel after: no change
    assert child.calls == [("stop", "preempted", 12.5), ("stop", "cancelled", None)]


def _on(agent: Any, run_id: str, gpus: list[int], attempt: int = 1) -> Attempt:
    cmd = AssignRun(run_id=run_id, attempt=attempt, job="j", agent="a", spec=JobSpec(name="j", command=["true"]),
                    scheduled_at=agent.ctx.clock.now(), due_at=agent.ctx.clock.now(), gpu_indices=gpus)
    made = Attempt(agent.ctx, agent.deps, cmd, Lease(key=f"run.{run_id}", token=1, value=LeaseValue(holder="a")),
                   dict, TraceContext())
    agent.held.index(made, True)
    return made


async def test_an_attempt_on_the_devices_of_a_stopping_one_spawns_once_that_one_has_ended() -> None:
    # Given a preempted attempt on GPUs 0-3 still in its grace, and a run on GPUs 4-7 going on
    agent, _ = await _agent()
    stopping = _on(agent, "low", [0, 1, 2, 3])
    for event in (E.LAUNCH, E.SPAWN, E.FENCE):
        stopping._apply(event)
    _on(agent, "other", [4, 5, 6, 7])
    # When the high run is given GPUs 2-5, and another run GPUs 6-7
    high = _on(agent, "high", [2, 3, 4, 5])
    beside = _on(agent, "beside", [6, 7])
    waits = asyncio.create_task(agent.clear_for(high))
    await asyncio.wait_for(agent.clear_for(beside), 1)  # a run going on is no reason to wait
    await asyncio.sleep(0.05)
    # Then the high run waits for the preempted one to end, and only for that
    assert not waits.done()
    stopping.done.set()
    agent.held.index(stopping, False)
    await asyncio.wait_for(waits, 1)
    assert agent.live.keys() == {"other", "high", "beside"} and 0 not in agent.held.on_devices


async def test_a_runs_next_attempt_here_waits_for_its_stopping_one() -> None:
    agent, _ = await _agent()
    old = _on(agent, "r", [])
    for event in (E.LAUNCH, E.SPAWN, E.FENCE):
        old._apply(event)
    new = _on(agent, "r", [], attempt=2)
    waits = asyncio.create_task(agent.clear_for(new))
    await asyncio.sleep(0.05)
    assert not waits.done()
    old.done.set()
    await asyncio.wait_for(waits, 1)


async def test_a_child_stopped_with_a_grace_is_killed_when_it_runs_out() -> None:
    # A child that ignores SIGTERM lives out its grace (0.5 s here, not the kill grace of 30 s), then SIGKILL
    async def keep(stream: str, data: bytes) -> None:
        pass

    run = Execution(["sh", "-c", "trap '' TERM; echo up; sleep 30"], {"PATH": "/usr/bin:/bin"}, limits=None,
                    timeout=None, kill_grace=30, on_output=keep)
    assert await run.start() is None
    await asyncio.sleep(0.2)
    began = time.monotonic()
    run.stop("preempted", 0.5)
    outcome = await asyncio.wait_for(run.wait(), 10)
    assert 0.4 < time.monotonic() - began < 5
    assert (outcome.outcome, outcome.reason) == ("killed", "preempted")

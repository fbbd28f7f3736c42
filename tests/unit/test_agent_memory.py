"""What an agent keeps of the attempts it has ended: nothing but their line in `Ended` (bounded:
tests/unit/test_ended.py). An ended attempt is freed by reference counting as it ends; one left in a reference cycle
waits for the cycle collector's full pass, which an agent's thresholds (JETCRON_GC_THRESHOLDS) put hundreds of
thousands of runs apart (docs/benchmarks.md, "What an agent holds")."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator
from datetime import timedelta

import pytest
from test_attempt_lifecycle import T0, _agent, _cmd, _msg, _settle, _spy_on_start

from jetcron.core.clock import ManualClock
from jetcron.core.lifecycle.attempt_state import AttemptPhase
from jetcron.wire.messages import CancelRun
from jetcron_services.agent.host.executor import Execution


@pytest.fixture
def no_cycle_collector() -> Iterator[None]:
    """The collector off, as it is for an agent between its full passes: only reference counting frees."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


@pytest.mark.usefixtures("no_cycle_collector")
async def test_an_ended_attempt_is_freed_as_it_ends_not_left_to_the_cycle_collector() -> None:
    # Given a sim agent
    agent, _ = await _agent()
    started = _spy_on_start(agent)
    clock = agent.ctx.clock
    assert isinstance(clock, ManualClock)

    # When attempts end each way they do: due at once, staged until due, cancelled while staged
    await agent.take(_msg(_cmd("at-once")))
    await agent.take(_msg(_cmd("staged", due=T0 + timedelta(seconds=1))))
    await agent.take(_msg(_cmd("cancelled", due=T0 + timedelta(hours=1))))
    await agent.on_control(_msg(CancelRun(run_id="cancelled", attempt=1, reason="cancelled")))
    clock.advance(1.0)
    assert await agent.waiting.start_due() == 1
    await _settle(agent)
    assert [(a.cmd.run_id, a.phase) for a in started] == [
        ("at-once", AttemptPhase.ENDED), ("staged", AttemptPhase.ENDED), ("cancelled", AttemptPhase.ENDED)]
    assert (agent.attempts, agent.live, len(agent.waiting), len(agent.ended)) == ({}, {}, 0, 3)

    # Then, once nothing of this test holds them either, each is gone without a collection
    refs = {a.cmd.run_id: weakref.ref(a) for a in started}
    started.clear()
    assert {run_id for run_id, ref in refs.items() if ref() is not None} == set()


class _Owner:
    """Holds its execution and takes its output through a method of its own, as an attempt does."""

    def __init__(self, script: str) -> None:
        self.lines: list[bytes] = []
        self.execution = Execution(["/bin/sh", "-c", script], {"PATH": "/usr/bin:/bin"}, limits=None, timeout=30,
                                   kill_grace=1.0, on_output=self.output)

    async def output(self, _stream: str, data: bytes) -> None:
        self.lines.append(data)


@pytest.mark.usefixtures("no_cycle_collector")
async def test_an_execution_lets_its_attempt_go_once_its_child_has_ended() -> None:
    # Given a child run to its end, its output read by its owner
    owner = _Owner("echo done")
    assert await owner.execution.start() is None
    assert (await owner.execution.wait()).outcome == "succeeded"
    assert owner.lines == [b"done\n"]

    # Then the owner (an attempt, which keeps its execution) is freed without a collection
    ref = weakref.ref(owner)
    del owner
    assert ref() is None

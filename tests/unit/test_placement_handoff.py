"""The direct hand-off of an assignment (jetcron.bus.direct, as placement uses it) on the bus's twins: an agent that
answers `taken` gets no AssignRun on its stream; one that refuses, does not answer in time or does not serve the subject
gets the AssignRun on the stream; one that let a hand-off go unanswered is sent to the stream straight away for
a while, then asked again."""

from __future__ import annotations

import asyncio
from typing import Any

from twin_support import twin_context

from jetcron.bus.direct import Direct
from jetcron.bus.memory import MemoryPublisher, MemoryRpc
from jetcron.bus.ports import Message
from jetcron.config import Settings
from jetcron.core.lifecycle.handoff import QUIET_FOR
from jetcron.core.lifecycle.runs import new_run
from jetcron.core.models import AgentInfo, JobSpec, Resources, RunState
from jetcron.wire import subjects as s
from jetcron.wire.codec import decode, encode
from jetcron.wire.messages import HANDOFF_REFUSED, HANDOFF_TAKEN, AssignRun, place_run_for
from jetcron_services.placement.service import Placer
from jetcron_services.placement.view import View
from jetcron_services.runtime import Context

SPEC = JobSpec(name="nightly", command=["true"], resources=Resources(cpu=1, memory_mb=256))


class Agent:
    """Serves agent-1's hand-off subject: answers each request with `answer` (None: never answers)."""

    def __init__(self, rpc: MemoryRpc, answer: bytes | None) -> None:
        self.answer = answer
        self.got: list[AssignRun] = []
        self.rpc = rpc

    async def serve(self) -> None:
        await self.rpc.serve(s.handoff_subject("agent-1"), self.on_handoff)

    async def on_handoff(self, msg: Message) -> None:
        self.got.append(decode(msg.data, AssignRun))
        if self.answer is not None:
            # Answered from a task of its own after the handler has returned, as the agent answers
            asyncio.get_running_loop().call_soon(asyncio.ensure_future, msg.respond(self.answer))


async def leader(answer: bytes | None, *, served: bool = True, timeout: float = 0.05) -> tuple[Context, Agent, Placer]:
    """A leader on the twins whose one agent answers `answer`, holding one scheduled run."""
    ctx = twin_context("placement", settings=Settings(handoff_timeout=timeout))
    assert isinstance(ctx.rpc, MemoryRpc)
    agent = Agent(ctx.rpc, answer)
    if served:
        await agent.serve()
    now = ctx.clock.now()
    view = View(ctx)
    view.upsert_agent(AgentInfo(agent_id="agent-1", cpu=4, memory_mb=4096, heartbeat_at=now, started_at=now))
    placer = Placer(ctx, view)
    run = new_run(SPEC, run_id="nightly.r1", state=RunState.SCHEDULED, scheduled_at=now, due_at=now, now=now)
    await ctx.runs.create(run.run_id, run)
    placer.offered(place_run_for(run))
    return ctx, agent, placer


def streamed(ctx: Context) -> list[AssignRun]:
    assert isinstance(ctx.publisher, MemoryPublisher)
    return [decode(p.data, AssignRun) for p in ctx.publisher.on(s.assign_subject("*"))]


async def placed(answer: bytes | None, *, served: bool = True) -> tuple[Context, Agent, list[AssignRun]]:
    """One pass of a leader (leader()) and its assignment sent. Returns the context, the agent, and the
    AssignRuns the stream got."""
    ctx, agent, placer = await leader(answer, served=served)
    await placer.place_once()
    await placer.sent()
    stored, _ = await ctx.runs.get("nightly.r1")
    assert (stored.state, stored.agents) == (RunState.ASSIGNED, ["agent-1"])
    return ctx, agent, streamed(ctx)


async def test_an_assignment_the_agent_takes_is_not_written_to_its_stream() -> None:
    _, agent, streamed = await placed(HANDOFF_TAKEN)
    assert [(cmd.run_id, cmd.attempt, cmd.agent) for cmd in agent.got] == [("nightly.r1", 1, "agent-1")]
    assert agent.got[0].spec == SPEC
    assert streamed == []


async def test_an_assignment_the_agent_refuses_goes_to_its_stream() -> None:
    _, agent, streamed = await placed(HANDOFF_REFUSED)
    assert len(agent.got) == 1
    assert [(cmd.run_id, cmd.attempt, cmd.agent) for cmd in streamed] == [("nightly.r1", 1, "agent-1")]


async def test_an_assignment_not_answered_in_time_goes_to_its_stream() -> None:
    _, agent, streamed = await placed(None)
    assert len(agent.got) == 1
    assert [(cmd.run_id, cmd.agent) for cmd in streamed] == [("nightly.r1", "agent-1")]


async def test_a_pass_does_not_wait_for_a_hand_off_its_agent_has_not_answered() -> None:
    # Given an agent that does not answer, and a hand-off timeout far longer than a pass takes
    ctx, agent, placer = await leader(None, timeout=0.5)
    # When a pass places the run
    await placer.place_once()
    # Then the pass is over with the run assigned while its hand-off still waits: nothing is on the stream yet
    stored, _ = await ctx.runs.get("nightly.r1")
    assert (stored.state, streamed(ctx)) == (RunState.ASSIGNED, [])
    # And once the hand-off's time is up, the assignment goes to the stream
    await placer.sent()
    assert len(agent.got) == 1
    assert [(cmd.run_id, cmd.agent) for cmd in streamed(ctx)] == [("nightly.r1", "agent-1")]


async def test_an_agent_that_does_not_serve_hand_offs_gets_its_assignment_by_the_stream() -> None:
    _, agent, streamed = await placed(HANDOFF_TAKEN, served=False)
    assert agent.got == []
    assert [(cmd.run_id, cmd.agent) for cmd in streamed] == [("nightly.r1", "agent-1")]


async def hand(direct: Direct, cmd: AssignRun) -> bool:
    return await direct.hand(cmd.agent, s.handoff_subject(cmd.agent), encode(cmd))


def _cmd(run_id: str) -> AssignRun:
    now = twin_context().clock.now()
    return AssignRun(run_id=run_id, attempt=1, job="nightly", agent="agent-1", spec=SPEC, scheduled_at=now,
                     due_at=now)


async def test_an_agent_that_let_a_hand_off_go_unanswered_is_sent_to_the_stream_for_a_while_then_asked_again(
        ) -> None:
    rpc = MemoryRpc()
    agent = Agent(rpc, None)
    await agent.serve()
    now = [100.0]
    handoff = Direct(rpc, "assign", timeout=0.01, clock=lambda: now[0])

    # When one hand-off goes unanswered
    assert await hand(handoff, _cmd("a")) is False
    # Then the next ones within QUIET_FOR timeouts are not asked at all
    agent.answer = HANDOFF_TAKEN
    now[0] += 0.01 * QUIET_FOR - 0.001
    assert await hand(handoff, _cmd("b")) is False
    assert [cmd.run_id for cmd in agent.got] == ["a"]
    # And once that has passed the agent is asked again, and takes it
    now[0] += 0.002
    assert await hand(handoff, _cmd("c")) is True
    assert [cmd.run_id for cmd in agent.got] == ["a", "c"]
    assert handoff.quiet.until == {}


async def test_an_agent_with_no_responder_is_not_asked_again_at_once() -> None:
    rpc = MemoryRpc()
    now = [0.0]
    handoff = Direct(rpc, "assign", timeout=0.5, clock=lambda: now[0])
    assert await hand(handoff, _cmd("a")) is False
    assert handoff.quiet.until == {"agent-1": 0.5 * QUIET_FOR}
    # A refusal is an answer: it quiets nothing (the agent was full, the next may fit)
    agent = Agent(rpc, HANDOFF_REFUSED)
    await agent.serve()
    now[0] = 0.5 * QUIET_FOR
    assert await hand(handoff, _cmd("b")) is False
    assert handoff.quiet.until == {}
    assert [cmd.run_id for cmd in agent.got] == ["b"]


async def test_a_connection_failing_under_a_hand_off_sends_it_to_the_stream() -> None:
    class Closed(MemoryRpc):
        async def request(self, subject: str, data: bytes, *, timeout: float,
                          headers: dict[str, str] | None = None) -> Any:
            raise RuntimeError("nats: connection closed")

    handoff = Direct(Closed(), "assign", timeout=0.5, clock=lambda: 0.0)
    assert await hand(handoff, _cmd("a")) is False

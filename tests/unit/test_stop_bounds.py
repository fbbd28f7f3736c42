"""A stop waits for a service's work only while its server answers (runtime.ends_within), and the connection
closing under a task as the service stops is that task's end, not a failure (runtime.background)."""

from __future__ import annotations

import asyncio
from typing import Any

import nats.errors

from jetcron.bus.link import NatsLink
from jetcron_services.runtime import background, ends_within


class Log:
    def __init__(self) -> None:
        self.errors: list[str] = []
        self.warnings: list[str] = []

    def error(self, event: str, **fields: Any) -> None:
        self.errors.append(event)

    def warning(self, event: str, **fields: Any) -> None:
        self.warnings.append(event)


class Link:
    """ports.Link's answers a stop asks for: whether the connection is up, and what a closed one raises."""

    is_connected = True

    def connected(self) -> bool:
        return self.is_connected

    closed = NatsLink.closed  # the adapter's own test of an error


class Ctx:
    def __init__(self) -> None:
        self.link = Link()
        self.log = Log()
        self.stop = asyncio.Event()
        self.stopping_without_nats = False


async def _forever() -> None:
    await asyncio.Event().wait()


async def test_work_that_ends_ends_the_wait() -> None:
    ctx = Ctx()
    done = asyncio.ensure_future(asyncio.sleep(0.01))
    assert await ends_within(ctx, {done}, 5.0) == "ended"  # type: ignore[arg-type]


async def test_work_waiting_on_a_server_that_answers_is_waited_for_its_limit() -> None:
    ctx = Ctx()
    stuck = asyncio.ensure_future(_forever())
    assert await ends_within(ctx, {stuck}, 0.3) == "late"  # type: ignore[arg-type]
    stuck.cancel()


async def test_work_waiting_on_a_server_that_does_not_answer_is_not_waited_for() -> None:
    ctx = Ctx()
    ctx.link.is_connected = False
    stuck = asyncio.ensure_future(_forever())
    loop = asyncio.get_running_loop()
    started = loop.time()
    assert await ends_within(ctx, {stuck}, 30.0) == "cut off"  # type: ignore[arg-type]
    assert loop.time() - started < 1.0
    stuck.cancel()


async def test_busy_work_is_waited_for_even_without_a_server() -> None:
    # (an agent's running children: they finish, or their leases fence them, without the server)
    ctx = Ctx()
    ctx.link.is_connected = False
    stuck = asyncio.ensure_future(_forever())
    assert await ends_within(ctx, {stuck}, 0.3, cut_off=lambda: False) == "late"  # type: ignore[arg-type]
    stuck.cancel()


async def test_the_connection_closing_under_a_task_is_a_failure_only_while_the_service_runs() -> None:
    async def watch() -> None:
        raise nats.errors.ConnectionClosedError

    for stopping, logged in ((False, ["background task failed"]), (True, [])):
        ctx = Ctx()
        if stopping:
            ctx.stop.set()
        task = background(ctx, watch())  # type: ignore[arg-type]
        await asyncio.gather(task, return_exceptions=True)
        await asyncio.sleep(0)
        assert ctx.log.errors == logged, stopping


class Frozen:
    """A client on a server that answers nothing, shaped as nats-py's: its drain takes the first cancel as its own
    timeout and goes on to wait for a flush; its flush and close wait until cancelled."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    async def flush(self, timeout: int = 10) -> None:
        self.calls.append("flush")
        await asyncio.Event().wait()

    async def drain(self) -> None:
        self.calls.append("drain")
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            pass
        await asyncio.Event().wait()

    async def close(self) -> None:
        self.calls.append("close")
        await asyncio.Event().wait()


async def test_closing_a_connection_to_a_frozen_server_ends_within_its_bounds() -> None:
    from jetcron.bus import rpc

    conn = Frozen()
    started = asyncio.get_running_loop().time()
    assert await asyncio.wait_for(rpc.close(conn, drain=1.0, timeout=0.5), timeout=5) is False  # type: ignore[arg-type]
    # the flush went unanswered: no drain (its cut-short end is a traceback at exit), a bounded close
    assert conn.calls == ["flush", "close"]
    assert asyncio.get_running_loop().time() - started < 0.5 + 0.5 + 3 * 0.1 + 0.3


async def test_a_step_that_swallows_a_cancel_is_cancelled_again() -> None:
    from jetcron.bus import rpc

    conn = Frozen()
    assert await asyncio.wait_for(rpc._within(conn.drain(), 0.1), timeout=2) is False


class Answering:
    """A client on a server that answers: its flush, drain and close end at once."""

    is_connected = True

    def __init__(self) -> None:
        self.calls: list[str] = []

    async def flush(self, timeout: int = 10) -> None:
        self.calls.append("flush")

    async def drain(self) -> None:
        self.calls.append("drain")

    async def close(self) -> None:
        self.calls.append("close")


class FrozenConnected(Frozen):
    is_connected = True  # (a frozen server is still connected until the pings go unanswered)


async def test_a_stop_says_once_that_its_server_did_not_answer_and_nothing_when_it_did() -> None:
    from jetcron_services import runtime

    answering = Ctx()
    answering.link = NatsLink(Answering())  # type: ignore[assignment,arg-type]
    await runtime._disconnect(answering)  # type: ignore[arg-type]
    assert (answering.link.nc.calls, answering.log.warnings) == (["flush", "drain"], [])  # type: ignore[attr-defined]

    # The stop ended before the client noticed the frozen server: the unanswered flush says it
    frozen = Ctx()
    frozen.link = NatsLink(FrozenConnected())  # type: ignore[assignment,arg-type]
    await asyncio.wait_for(runtime._disconnect(frozen), timeout=5)  # type: ignore[arg-type]
    said = ["stopping without NATS: the server does not answer (gone, frozen or unreachable); "
            "what was acknowledged is in JetStream"]
    assert frozen.log.warnings == said

    # What said it first (the connection lost, an agent's tasks cut short) is not repeated by the flush
    first = Ctx()
    first.link = NatsLink(FrozenConnected())  # type: ignore[assignment,arg-type]
    runtime.stopping_without_nats(first, "this agent's entry expires by itself")  # type: ignore[arg-type]
    await asyncio.wait_for(runtime._disconnect(first), timeout=5)  # type: ignore[arg-type]
    assert first.log.warnings == ["stopping without NATS: the server does not answer (gone, frozen or "
                                  "unreachable); this agent's entry expires by itself"]

"""A stop waits for a service's work only while its server answers (runtime.ends_within), and the connection
closing under a task as the service stops is that task's end, not a failure (runtime.background)."""

from __future__ import annotations

import asyncio
from typing import Any

import nats.errors

from jetcron.services.runtime import background, ends_within


class Log:
    def __init__(self) -> None:
        self.errors: list[str] = []

    def error(self, event: str, **fields: Any) -> None:
        self.errors.append(event)


class Conn:
    is_connected = True


class Ctx:
    def __init__(self) -> None:
        self.nc = Conn()
        self.log = Log()
        self.stop = asyncio.Event()


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
    ctx.nc.is_connected = False
    stuck = asyncio.ensure_future(_forever())
    loop = asyncio.get_running_loop()
    started = loop.time()
    assert await ends_within(ctx, {stuck}, 30.0) == "cut off"  # type: ignore[arg-type]
    assert loop.time() - started < 1.0
    stuck.cancel()


async def test_busy_work_is_waited_for_even_without_a_server() -> None:
    # (an agent's running children: they finish, or their leases fence them, without the server)
    ctx = Ctx()
    ctx.nc.is_connected = False
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
    await asyncio.wait_for(rpc.close(conn, drain=1.0, timeout=0.5), timeout=5)  # type: ignore[arg-type]
    # the flush went unanswered: no drain (its cut-short end is a traceback at exit), a bounded close
    assert conn.calls == ["flush", "close"]
    assert asyncio.get_running_loop().time() - started < 0.5 + 0.5 + 3 * 0.1 + 0.3


async def test_a_step_that_swallows_a_cancel_is_cancelled_again() -> None:
    from jetcron.bus import rpc

    conn = Frozen()
    assert await asyncio.wait_for(rpc._within(conn.drain(), 0.1), timeout=2) is False

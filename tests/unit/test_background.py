"""A service's long-lived task that dies says so at once (runtime.background)."""

from __future__ import annotations

import asyncio
from typing import Any

from jetcron.bus.link import NatsLink
from jetcron_services.runtime import background


class Log:
    def __init__(self) -> None:
        self.errors: list[tuple[str, dict[str, Any]]] = []

    def error(self, event: str, **fields: Any) -> None:
        self.errors.append((event, fields))


class Link:
    closed = NatsLink.closed  # the adapter's own test of an error


class Ctx:
    def __init__(self) -> None:
        self.log = Log()
        self.link = Link()


async def test_a_task_that_raises_is_logged_when_it_ends() -> None:
    ctx = Ctx()

    async def place_forever() -> None:
        raise RuntimeError("storage did not answer")

    task = background(ctx, place_forever())  # type: ignore[arg-type]
    await asyncio.gather(task, return_exceptions=True)
    await asyncio.sleep(0)  # done callbacks run on the next turn of the loop

    [(event, fields)] = ctx.log.errors
    assert event == "background task failed"
    assert fields["task"].endswith("place_forever")
    assert fields["error"] == "RuntimeError('storage did not answer')"


async def test_a_task_that_returns_or_is_cancelled_is_not_an_error() -> None:
    ctx = Ctx()

    async def done() -> None:
        return None

    async def forever() -> None:
        await asyncio.Event().wait()

    finished, cancelled = background(ctx, done()), background(ctx, forever())  # type: ignore[arg-type]
    await asyncio.sleep(0)
    cancelled.cancel()
    await asyncio.gather(finished, cancelled, return_exceptions=True)
    await asyncio.sleep(0)
    assert ctx.log.errors == []

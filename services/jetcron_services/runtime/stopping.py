"""How a service stops: within its grace, not waiting on a server that does not answer, saying once that it
did not; and its long-lived tasks, whose failures are said at once."""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Callable, Coroutine
from functools import partial
from typing import Any, Literal

from jetcron_services.runtime.context import Supervised

STOP_RESERVE = 4.0
"""Seconds of a service's stop grace kept for what follows its main (the registry, the connection, its tasks),
so that the whole stop fits the grace the orchestrator gives (compose's 10 s) even with the server frozen."""
TEARDOWN_STEP = 0.5
"""Seconds each step of that teardown may wait on the server."""
STOP_POLL = 0.25
CANCELLED_CLEANUP = 1.5
"""Seconds a service cut short has for its own clean-up (an agent ends its spare and its reaper)."""


WITHOUT_NATS = "stopping without NATS: the server does not answer (gone, frozen or unreachable)"
ACKNOWLEDGED = "what was acknowledged is in JetStream"


def stopping_without_nats(ctx: Supervised, then: str) -> None:
    """The line a stop writes, once, when its server did not answer: whatever noticed it first (the connection
    lost, work cut short, the last flush unanswered) and `then`, what follows for what the process held."""
    if not ctx.stopping_without_nats:
        ctx.stopping_without_nats = True
        ctx.log.warning(f"{WITHOUT_NATS}; {then}")


def background(ctx: Supervised, coro: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
    """A long-lived task of a service. One that ends by raising says so in the log at once: the services await
    these only when they stop, and a placement loop that had died in silence left a leader placing nothing."""
    task = asyncio.create_task(coro)
    task.add_done_callback(partial(_report_end, ctx))
    return task


def _report_end(ctx: Supervised, task: asyncio.Task[None]) -> None:
    if not task.cancelled() and (exc := task.exception()) is not None:
        if ctx.link.closed(exc) and ctx.stop.is_set():
            return  # the connection closed under it as the service stops: its end, not a failure
        name = getattr(task.get_coro(), "__qualname__", task.get_name())
        ctx.log.error("background task failed", task=name, error=repr(exc), exc_info=exc)


def dump_tasks() -> None:
    """SIGUSR1: every task's stack to stderr. A stalled service shows where it waits, which a thread dump
    (py-spy) of an event loop cannot say."""
    tasks = asyncio.all_tasks()
    print(f"--- {len(tasks)} tasks ---", file=sys.stderr)
    for task in tasks:
        task.print_stack(limit=12, file=sys.stderr)
    sys.stderr.flush()


async def _stopped(ctx: Supervised) -> None:
    await ctx.stop.wait()


async def _until_stopped(ctx: Supervised, serving: asyncio.Future[None], grace: float) -> None:
    """Wait for the service to end; once asked to stop, give it `grace` seconds, then cut it short. With its
    NATS gone, a service's writes retry for ever: an operator's SIGTERM must still end it (nothing acknowledged
    is lost: every acknowledged write is in JetStream already)."""
    asked: asyncio.Future[None] = asyncio.ensure_future(_stopped(ctx))
    try:
        await asyncio.wait({serving, asked}, return_when=asyncio.FIRST_COMPLETED)
        if not serving.done() and not await _stops_within(ctx, serving, grace):
            serving.cancel()
            # asyncio.wait, not wait_for: a second cancel at its timeout would cut the service's own clean-up
            await asyncio.wait({serving}, timeout=CANCELLED_CLEANUP)
            return
        serving.result()
    finally:
        asked.cancel()


async def _stops_within(ctx: Supervised, serving: asyncio.Future[None], grace: float) -> bool:
    """Whether the service ends by itself within `grace` seconds. A service whose server does not answer is not
    waited for, unless it is busy (an agent's running children): every write it would make waits out the JetStream
    timeout, and what it acknowledged is in JetStream already."""
    ended = await ends_within(ctx, {serving}, grace, cut_off=lambda: not ctx.busy())
    if ended == "cut off":
        stopping_without_nats(ctx, ACKNOWLEDGED)
    elif ended == "late":
        ctx.log.error("not stopped within the grace period: cutting it short", grace_seconds=grace)
    return ended == "ended"


async def ends_within(ctx: Supervised, futures: set[asyncio.Future[Any]], limit: float, *,
                      cut_off: Callable[[], bool] = lambda: True) -> Literal["ended", "cut off", "late"]:
    """Wait up to `limit` seconds for `futures` to end; no longer once the connection is lost (its pings
    unanswered: jetcron.bus.connect.PING_INTERVAL) while `cut_off()` says so: what they wait for then is the server."""
    deadline = time.monotonic() + limit
    while (left := deadline - time.monotonic()) > 0:
        _, pending = await asyncio.wait(futures, timeout=min(left, STOP_POLL))
        if not pending:
            return "ended"
        if not ctx.link.connected() and cut_off():
            return "cut off"
    return "late"


async def _end_tasks(ctx: Supervised, timeout: float = 1.0) -> bool:
    """Cancel what is left; True if every task ended within `timeout`."""
    tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    for task in tasks:
        task.cancel()
    if not tasks:
        return True
    _, pending = await asyncio.wait(tasks, timeout=timeout)
    if pending:
        names = sorted(getattr(t.get_coro(), "__qualname__", t.get_name()) for t in pending)
        ctx.log.error("tasks did not end when cancelled", tasks=names)
    return not pending


async def _disconnect(ctx: Supervised) -> None:
    """Drain what is buffered, briefly: a server that is gone or frozen gets a close, not a wait. A server that
    does not answer the flush is said to be so: a stop that ended before its client noticed (a frozen server is
    noticed within 8 s, a stop takes less) would otherwise say nothing of it."""
    if not await ctx.link.close(drain=1.0 if ctx.link.connected() else None, timeout=TEARDOWN_STEP):
        stopping_without_nats(ctx, ACKNOWLEDGED)

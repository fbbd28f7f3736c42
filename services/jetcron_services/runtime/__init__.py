"""What every service shares at run time: its Context (context.py), its start (start.py) and its stop
(stopping.py); `serve` runs one until SIGTERM."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import Awaitable, Callable

import uvloop

from jetcron.config import Settings
from jetcron.core.errors import Misconfigured, Unauthorized, UnsafeServer
from jetcron_services.runtime.context import Context, Supervised, SystemClock
from jetcron_services.runtime.start import boot, keep_topology, run, tune_gc
from jetcron_services.runtime.stopping import (
    STOP_RESERVE,
    _disconnect,
    _end_tasks,
    _until_stopped,
    background,
    dump_tasks,
    ends_within,
    stopping_without_nats,
)

__all__ = ["Context", "Supervised", "SystemClock", "background", "boot", "ends_within", "keep_topology", "run",
           "serve", "stopping_without_nats", "tune_gc"]

UVLOOP = frozenset({"api", "trigger", "placement", "run_tracker"})
"""The services on a run's path run on uvloop: 5 % less CPU per run than asyncio's loop (docs/benchmarks-history.md).
The agent keeps asyncio's own loop, whose child watcher and pipes its children and spares are tested on; the
gateway and the notifier are not on a run's path."""


def _watch_children_by_pidfd(loop: asyncio.AbstractEventLoop) -> None:
    """Python 3.11's asyncio waits for each child in a thread of its own (ThreadedChildWatcher): a thread started
    per run was an eighth of a busy agent's CPU. A pidfd lets the loop itself hear the exit; 3.12 does this by
    default (and deprecates choosing a watcher), so only 3.11 is changed."""
    if sys.version_info >= (3, 12) or not hasattr(os, "pidfd_open"):
        return
    try:
        os.close(os.pidfd_open(os.getpid()))
    except OSError:  # a kernel older than 5.3, or a seccomp profile that refuses it: keep the threads
        return
    watcher = asyncio.PidfdChildWatcher()
    watcher.attach_loop(loop)
    asyncio.set_child_watcher(watcher)

def serve(name: str, main: Callable[[Context], Awaitable[None]], settings: Settings | None = None) -> None:
    """Run a service until SIGTERM or Ctrl-C, then let it drain and close the connection."""

    async def runner() -> None:
        ctx = await boot(name, settings or Settings())
        loop = asyncio.get_running_loop()
        if name not in UVLOOP:
            _watch_children_by_pidfd(loop)
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, ctx.stop.set)
        loop.add_signal_handler(signal.SIGUSR1, dump_tasks)
        serving = asyncio.ensure_future(run(ctx, main))
        try:
            await _until_stopped(ctx, serving, max(ctx.settings.grace_for(name) - STOP_RESERVE, 1.0))
        finally:
            await _disconnect(ctx)
            if not await _end_tasks(ctx):
                # A task that ignores its cancel would hold asyncio.run's shutdown for ever: leave without it.
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(1)

    try:
        with asyncio.Runner(loop_factory=uvloop.new_event_loop if name in UVLOOP else None) as running:
            running.run(runner())
    except (UnsafeServer, Misconfigured, Unauthorized) as exc:
        # The operator has a server to reconfigure: say what to change, not a traceback that buries it.
        print(f"jetcron {name}: refusing to start: {exc}", file=sys.stderr, flush=True)
        raise SystemExit(2) from None

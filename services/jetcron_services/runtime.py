"""What every service does at start: settings, logging, connect, check the server, build the topology."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import re
import signal
import socket
import sys
import time
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any, Literal

import structlog
import uvloop

from jetcron import __version__
from jetcron.bus import lease as lease_store
from jetcron.bus import rpc
from jetcron.bus.cluster import record_verdict
from jetcron.bus.connect import cluster_size, connect
from jetcron.bus.consume import ServerConsumers
from jetcron.bus.handles import JetStream
from jetcron.bus.kv import ServerBuckets, Store
from jetcron.bus.lease import Leases
from jetcron.bus.link import NatsLink
from jetcron.bus.ports import Buckets, Consumers, Link, Publisher, Records, Rpc, ServiceRegistry, Streams
from jetcron.bus.publish import StreamPublisher
from jetcron.bus.streams import ServerStreams
from jetcron.bus.topology import ensure_topology
from jetcron.config import Settings
from jetcron.core.clock import Clock
from jetcron.core.errors import JetcronError, Misconfigured, Unauthorized, UnsafeServer
from jetcron.core.lifecycle.retention import job_ttl, record_ttl
from jetcron.core.models import AgentInfo, JobRecord, Run, TenantPolicy
from jetcron.core.timing.calendars import CalendarRecord
from jetcron.ops.retention import History
from jetcron.telemetry import metrics
from jetcron.telemetry.gc_pauses import GcPauses
from jetcron.telemetry.http import HealthServer
from jetcron.telemetry.logging import setup_logging
from jetcron.telemetry.tracing import flush_tracing, setup_tracing
from jetcron.wire import subjects as s
from jetcron.wire.messages import Cursor, ServiceInstance

STOP_RESERVE = 4.0
"""Seconds of a service's stop grace kept for what follows its main (the registry, the connection, its tasks),
so that the whole stop fits the grace the orchestrator gives (compose's 10 s) even with the server frozen."""
TEARDOWN_STEP = 0.5
"""Seconds each step of that teardown may wait on the server."""
STOP_POLL = 0.25
CANCELLED_CLEANUP = 1.5
"""Seconds a service cut short has for its own clean-up (an agent ends its spare and its reaper)."""
UVLOOP = frozenset({"api", "trigger", "placement", "run_tracker"})
"""The services on a run's path run on uvloop: 5 % less CPU per run than asyncio's loop (docs/benchmarks-history.md).
The agent keeps asyncio's own loop, whose child watcher and pipes its children and spares are tested on; the
gateway and the notifier are not on a run's path."""


@dataclass(frozen=True)
class SystemClock:
    skew: float = 0.0
    """Seconds this process's clock is off (JETCRON_CLOCK_SKEW: the clock-skew fault tests); 0 in service."""

    def now(self) -> datetime:
        return datetime.now(UTC) + timedelta(seconds=self.skew) if self.skew else datetime.now(UTC)


@dataclass
class Context:
    """Everything a service needs, built once at start."""

    name: str
    settings: Settings
    link: Link
    """Its own connection, as the runtime minds it (up or not, the topology check, its registry entry, the
    close): the other ports are built on it (jetcron.bus.link.NatsLink; twin: an absent one)."""
    jobs: Records[JobRecord]
    runs: Records[Run]
    cursors: Records[Cursor]
    agents: Records[AgentInfo]
    tenants: Records[TenantPolicy]
    calendars: Records[CalendarRecord]
    """Named calendars (jc_calendars): the api writes them, the trigger watches them."""
    leases: Leases
    history: History
    publisher: Publisher
    """Where this service's commands and events go (jetcron.bus.publish.StreamPublisher; twin:
    memory.MemoryPublisher)."""
    rpc: Rpc
    """Requests, replies and control messages (jetcron.bus.rpc.NatsRpc; twin: memory.MemoryRpc)."""
    buckets: Buckets
    """The service's other buckets of records (jetcron.bus.kv.ServerBuckets; twin: memory.MemoryBuckets)."""
    consumers: Consumers
    """Its durable consumers, consumed (jetcron.bus.consume.ServerConsumers; twin: memory.MemoryConsumers)."""
    streams: Streams
    """What streams and consumers hold, new events followed, history let go (jetcron.bus.streams.ServerStreams; twin:
    memory.MemoryStreams)."""
    clock: Clock = field(default_factory=SystemClock)
    """What the service reads the time from: the system's (skewed in the clock-skew fault tests), or a test's."""
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    log: structlog.stdlib.BoundLogger = field(default_factory=lambda: structlog.get_logger("jetcron"))
    busy: Callable[[], bool] = lambda: False
    """Whether this process holds work that needs no server to finish (an agent's running children): a stop then
    waits its grace even with the server gone."""
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    """Set by the service once its consumers and watches exist: /readyz answers 200 from then on."""
    metrics_url: str = ""
    remake_topology: Callable[[], Awaitable[None]] | None = None
    """Makes every stream, bucket and consumer again (ensure_topology with this service's settings); None for
    the processes that never make it (agents, the gateway)."""
    stopping_without_nats: bool = False
    """Said already (stopping_without_nats()): a stop says it once."""

    @property
    def instance(self) -> str:
        """This process's name among its peers: the configured id, or host-pid."""
        raw = self.settings.agent_id or f"{socket.gethostname().split('.')[0]}-{os.getpid()}"
        return re.sub(r"[^A-Za-z0-9_-]", "-", raw)

    def readiness(self) -> str | None:
        if not self.link.connected():
            return "not connected to NATS"
        if not self.ready.is_set():
            return "starting: consumers not ready yet"
        return None


def tune_gc(thresholds: tuple[int, int, int]) -> None:
    """Collect cycles less often than Python's default, and never walk what start-up built (modules, settings,
    schemas: it lives as long as the process). A service's heap is mostly records freed by reference counting."""
    gc.set_threshold(*thresholds)
    gc.freeze()


async def _make_topology(js: JetStream, replicas: int, settings: Settings) -> None:
    """ensure_topology with this service's settings, saying what it changed in place (or would not change)."""
    log = structlog.get_logger("jetcron")
    for note in await ensure_topology(js, replicas=replicas, limits=settings.limits):
        (log.warning if note.refused else log.info)("topology limits", change=note.text)


async def boot(name: str, settings: Settings) -> Context:
    setup_logging(name)
    setup_tracing(name, console=settings.trace_console)
    connected = await connect(settings.nats_url, name=f"jetcron-{name}", monitor_url=settings.nats_monitor_url,
                              ping_interval=settings.nats_ping_interval,
                              allow_unsafe=settings.allow_unsafe_storage, identity=settings.identity)
    nc, warnings = connected.nc, connected.warnings
    link = NatsLink(nc)
    js = link.js
    replicas = settings.replicas or (3 if cluster_size(nc) >= 3 else 1)
    # A short timeout for setup: a request a busy cluster leaves unanswered is retried, not waited out.
    # Agents never make the topology (their credential may not): a core service or `jetcron up` does.
    remake: Callable[[], Awaitable[None]] | None = None
    if name not in ("agent", "gateway"):
        remake = partial(_make_topology, rpc.jetstream(nc, timeout=3), replicas, settings)
        await remake()
        if connected.verdict is not None:
            await record_verdict(js, connected.verdict)
    clock, history = SystemClock(settings.clock_skew), settings.history
    tenants = await Store.open(js, s.BUCKET_TENANTS, TenantPolicy)
    ctx = Context(
        name=name, settings=settings, link=link,
        jobs=await Store.open(js, s.BUCKET_JOBS, JobRecord, lambda record: job_ttl(record, clock.now())),
        runs=await Store.open(js, s.BUCKET_RUNS, Run, lambda run: record_ttl(run, clock.now(), history)),
        cursors=await Store.open(js, s.BUCKET_CURSORS, Cursor),
        agents=await Store.open(js, s.BUCKET_AGENTS, AgentInfo),
        tenants=tenants, calendars=await Store.open(js, s.BUCKET_CALENDARS, CalendarRecord),
        leases=lease_store.on_server(js), publisher=StreamPublisher(js), rpc=rpc.NatsRpc(nc),
        buckets=ServerBuckets(js), consumers=ServerConsumers(js), streams=ServerStreams(js),
        history=History(tenants, history), clock=clock,
        remake_topology=remake,
    )
    ctx.log = structlog.get_logger("jetcron").bind(service=name)
    for w in warnings:
        ctx.log.warning("unsafe storage", detail=w)
    tune_gc(settings.gc_thresholds)
    return ctx


async def _announce(ctx: Context, registry: ServiceRegistry, started: datetime) -> None:
    """Keep this instance's entry in the services bucket fresh (it ages out a few heartbeats after a crash)."""
    every = min(5.0, max(0.5, ctx.settings.heartbeat * 2))
    while not ctx.stop.is_set():
        ready = ctx.readiness() is None
        metrics.SERVICE_READY.set(1 if ready else 0)
        entry = ServiceInstance(service=ctx.name, instance=ctx.instance, host=socket.gethostname(), pid=os.getpid(),
                                metrics_url=ctx.metrics_url, ready=ready, started_at=started,
                                heartbeat_at=ctx.clock.now())
        with contextlib.suppress(JetcronError):
            await registry.announce(entry)
        # Not ready when announced: say so again the moment it is, not a heartbeat later.
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(ctx.stop.wait() if ready else ctx.ready.wait(), timeout=every)


async def keep_topology(ctx: Context) -> None:
    """Every JETCRON_TOPOLOGY_CHECK seconds, make again what was deleted under the running system. What it held
    is gone, so it is said loudly (an error naming each part, jetcron_topology_recreated_total, an alert); the
    runs a queue carried come back through the reconciler, which re-drives runs from their records."""
    assert ctx.remake_topology is not None
    while True:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(ctx.stop.wait(), timeout=ctx.settings.topology_check)
            return
        missing: list[str] = []
        try:
            missing = await ctx.link.missing_parts()
            if missing:
                await ctx.remake_topology()
        except Exception as exc:  # a cluster electing a leader answers nothing for a while: look again later
            ctx.log.warning("topology check failed", missing=missing, error=repr(exc))
            continue
        for part in missing:
            metrics.child(metrics.TOPOLOGY_RECREATED, part=part).inc()
        if missing:
            ctx.log.error("streams, buckets or consumers were deleted under the running system: made again, "
                          "empty; what they held is lost", missing=missing)


async def run(ctx: Context, main: Callable[[Context], Awaitable[None]]) -> None:
    """Run a booted service with its HTTP port (/metrics, /livez, /readyz), registry entry and $SRV.PING."""
    http = HealthServer(ctx.readiness, host=ctx.settings.metrics_host, port=ctx.settings.metrics_port or 0)
    await http.start()
    ctx.metrics_url = http.url
    started = ctx.clock.now()
    registry = await ctx.link.registry()
    me = ServiceInstance(service=ctx.name, instance=ctx.instance, host=socket.gethostname(), pid=os.getpid(),
                         metrics_url=ctx.metrics_url, started_at=started, heartbeat_at=started)
    ping = await ctx.link.answer_pings(me, __version__)
    announcer = asyncio.create_task(_announce(ctx, registry, started))
    keeper = asyncio.create_task(keep_topology(ctx)) if ctx.remake_topology is not None else None
    ctx.log.info("serving health", metrics_url=ctx.metrics_url, instance=ctx.instance)
    pauses = GcPauses()
    pauses.install()
    try:
        await main(ctx)
    finally:
        pauses.uninstall()
        ctx.log.info("stopping", gc_pause_seconds=pauses.totals(), gc_longest_pause_seconds=pauses.longest())
        for task in (announcer, keeper):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        # Each bounded: with the server frozen neither answers, and the registry entry expires by itself.
        with contextlib.suppress(Exception):
            await asyncio.wait_for(registry.withdraw(me), timeout=TEARDOWN_STEP)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(ping.stop(), timeout=TEARDOWN_STEP)
        await http.stop()
        flush_tracing()


WITHOUT_NATS = "stopping without NATS: the server does not answer (gone, frozen or unreachable)"
ACKNOWLEDGED = "what was acknowledged is in JetStream"


def stopping_without_nats(ctx: Context, then: str) -> None:
    """The line a stop writes, once, when its server did not answer: whatever noticed it first (the connection
    lost, work cut short, the last flush unanswered) and `then`, what follows for what the process held."""
    if not ctx.stopping_without_nats:
        ctx.stopping_without_nats = True
        ctx.log.warning(f"{WITHOUT_NATS}; {then}")


def background(ctx: Context, coro: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
    """A long-lived task of a service. One that ends by raising says so in the log at once: the services await
    these only when they stop, and a placement loop that had died in silence left a leader placing nothing."""
    task = asyncio.create_task(coro)
    task.add_done_callback(partial(_report_end, ctx))
    return task


def _report_end(ctx: Context, task: asyncio.Task[None]) -> None:
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


async def _stopped(ctx: Context) -> None:
    await ctx.stop.wait()


async def _until_stopped(ctx: Context, serving: asyncio.Future[None], grace: float) -> None:
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


async def _stops_within(ctx: Context, serving: asyncio.Future[None], grace: float) -> bool:
    """Whether the service ends by itself within `grace` seconds. A service whose server does not answer is not
    waited for, unless it is busy (an agent's running children): every write it would make waits out the JetStream
    timeout, and what it acknowledged is in JetStream already."""
    ended = await ends_within(ctx, {serving}, grace, cut_off=lambda: not ctx.busy())
    if ended == "cut off":
        stopping_without_nats(ctx, ACKNOWLEDGED)
    elif ended == "late":
        ctx.log.error("not stopped within the grace period: cutting it short", grace_seconds=grace)
    return ended == "ended"


async def ends_within(ctx: Context, futures: set[asyncio.Future[Any]], limit: float, *,
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


async def _end_tasks(ctx: Context, timeout: float = 1.0) -> bool:
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


async def _disconnect(ctx: Context) -> None:
    """Drain what is buffered, briefly: a server that is gone or frozen gets a close, not a wait. A server that
    does not answer the flush is said to be so: a stop that ended before its client noticed (a frozen server is
    noticed within 8 s, a stop takes less) would otherwise say nothing of it."""
    if not await ctx.link.close(drain=1.0 if ctx.link.connected() else None, timeout=TEARDOWN_STEP):
        stopping_without_nats(ctx, ACKNOWLEDGED)


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

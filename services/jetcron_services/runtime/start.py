"""What every service does at start: connect, check the server, build the topology and the ports; then serve
its health, its registry entry and $SRV.PING while it runs."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import socket
from collections.abc import Awaitable, Callable
from datetime import datetime
from functools import partial

import structlog

from jetcron import __version__
from jetcron.bus import lease as lease_store
from jetcron.bus import rpc
from jetcron.bus.cluster import record_verdict
from jetcron.bus.connect import cluster_size, connect
from jetcron.bus.consume import ServerConsumers
from jetcron.bus.handles import JetStream
from jetcron.bus.kv import ServerBuckets, Store
from jetcron.bus.link import NatsLink
from jetcron.bus.ports import ServiceRegistry
from jetcron.bus.publish import StreamPublisher
from jetcron.bus.streams import ServerStreams
from jetcron.bus.topology import ensure_topology
from jetcron.config import Settings
from jetcron.core.errors import JetcronError
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
from jetcron_services.runtime.context import Context, SystemClock
from jetcron_services.runtime.stopping import TEARDOWN_STEP


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

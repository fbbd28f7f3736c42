"""What every service does at start: settings, logging, connect, check the server, build the topology."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

import structlog
from nats.aio.client import Client
from nats.js import JetStreamContext

from jetcron.bus.connect import cluster_size, connect
from jetcron.bus.kv import Store
from jetcron.bus.lease import Leases
from jetcron.bus.topology import ensure_topology
from jetcron.config import Settings
from jetcron.core.models import AgentInfo, JobRecord, Run, TenantPolicy
from jetcron.telemetry.logging import setup_logging
from jetcron.telemetry.tracing import setup_tracing
from jetcron.wire import subjects as s
from jetcron.wire.messages import Cursor


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(UTC)


@dataclass
class Context:
    """Everything a service needs, built once at start."""

    name: str
    settings: Settings
    nc: Client
    js: JetStreamContext
    jobs: Store[JobRecord]
    runs: Store[Run]
    cursors: Store[Cursor]
    agents: Store[AgentInfo]
    tenants: Store[TenantPolicy]
    leases: Leases
    clock: SystemClock = field(default_factory=SystemClock)
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    log: structlog.stdlib.BoundLogger = field(default_factory=lambda: structlog.get_logger("jetcron"))


async def boot(name: str, settings: Settings) -> Context:
    setup_logging(name)
    setup_tracing(name)
    nc, warnings = await connect(settings.nats_url, name=f"jetcron-{name}", monitor_url=settings.nats_monitor_url,
                                 allow_unsafe=settings.allow_unsafe_storage)
    js = nc.jetstream(timeout=10)
    replicas = settings.replicas or (3 if cluster_size(nc) >= 3 else 1)
    await ensure_topology(js, replicas=replicas)
    ctx = Context(
        name=name, settings=settings, nc=nc, js=js,
        jobs=await Store.open(js, s.BUCKET_JOBS, JobRecord),
        runs=await Store.open(js, s.BUCKET_RUNS, Run),
        cursors=await Store.open(js, s.BUCKET_CURSORS, Cursor),
        agents=await Store.open(js, s.BUCKET_AGENTS, AgentInfo),
        tenants=await Store.open(js, s.BUCKET_TENANTS, TenantPolicy),
        leases=Leases(js),
    )
    ctx.log = structlog.get_logger("jetcron").bind(service=name)
    for w in warnings:
        ctx.log.warning("unsafe storage", detail=w)
    return ctx


def serve(name: str, main: Callable[[Context], Awaitable[None]], settings: Settings | None = None) -> None:
    """Run a service until SIGTERM or Ctrl-C, then let it drain and close the connection."""

    async def runner() -> None:
        ctx = await boot(name, settings or Settings())
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, ctx.stop.set)
        try:
            await main(ctx)
        finally:
            try:
                await ctx.nc.drain()
            except Exception:
                await ctx.nc.close()

    asyncio.run(runner())

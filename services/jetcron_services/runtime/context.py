"""A service's Context: the ports built for it at start, its settings, clock, log and stop."""

from __future__ import annotations

import asyncio
import os
import re
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Protocol

import structlog

from jetcron.bus.lease import Leases
from jetcron.bus.ports import Buckets, Consumers, Link, Publisher, Records, Rpc, Streams
from jetcron.config import Settings
from jetcron.core.clock import Clock
from jetcron.core.models import AgentInfo, JobRecord, Run, TenantPolicy
from jetcron.core.timing.calendars import CalendarRecord
from jetcron.ops.retention import History
from jetcron.wire.messages import Cursor


@dataclass(frozen=True)
class SystemClock:
    skew: float = 0.0
    """Seconds this process's clock is off (JETCRON_CLOCK_SKEW: the clock-skew fault tests); 0 in service."""

    def now(self) -> datetime:
        return datetime.now(UTC) + timedelta(seconds=self.skew) if self.skew else datetime.now(UTC)


class Supervised(Protocol):
    """What the runtime's helpers (background tasks, a bounded stop) use of a service's Context."""

    log: structlog.stdlib.BoundLogger
    stop: asyncio.Event
    link: Link
    stopping_without_nats: bool

    @property
    def busy(self) -> Callable[[], bool]: ...


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

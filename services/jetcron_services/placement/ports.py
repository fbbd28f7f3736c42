"""What each part of placement uses of its service's Context: one Protocol per part, naming only those ports
(mypy holds each part to its own); the service's main() passes its Context, which satisfies them all."""

from __future__ import annotations

import asyncio
from typing import Protocol

import structlog

from jetcron.bus.lease import Leases
from jetcron.bus.ports import Buckets, Consumers, Publisher, Records, Rpc, Streams
from jetcron.config import Settings
from jetcron.core.clock import Clock
from jetcron.core.models import AgentInfo, Run, TenantPolicy
from jetcron_services.runtime import Supervised


class ClusterViewPorts(Protocol):
    agents: Records[AgentInfo]
    tenants: Records[TenantPolicy]
    settings: Settings
    clock: Clock
    log: structlog.stdlib.BoundLogger
    stop: asyncio.Event


class ViewPorts(ClusterViewPorts, Protocol):
    runs: Records[Run]
    streams: Streams


class OpenBoardPorts(Protocol):
    buckets: Buckets


class HeldRunsPorts(Protocol):
    clock: Clock


class AssignerPorts(Protocol):
    settings: Settings
    runs: Records[Run]
    rpc: Rpc
    publisher: Publisher
    log: structlog.stdlib.BoundLogger


class PreemptorPorts(Protocol):
    settings: Settings
    runs: Records[Run]
    leases: Leases
    rpc: Rpc
    publisher: Publisher
    log: structlog.stdlib.BoundLogger


class PlacerPorts(HeldRunsPorts, PreemptorPorts, AssignerPorts, Protocol): ...


class RecordTokensPorts(Protocol):
    streams: Streams
    stop: asyncio.Event
    log: structlog.stdlib.BoundLogger


class TakeUpPorts(Protocol):
    log: structlog.stdlib.BoundLogger


class LeadPorts(PlacerPorts, RecordTokensPorts, TakeUpPorts, Supervised, Protocol):
    consumers: Consumers

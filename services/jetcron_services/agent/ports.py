"""What each part of the agent uses of its service's Context: one Protocol per part, naming only those ports (mypy holds
each part to its own); the service's main() passes its Context, which satisfies them all."""

from __future__ import annotations

import asyncio
from typing import Protocol

import structlog

from jetcron.bus.lease import Leases
from jetcron.bus.ports import Publisher, Records, Rpc, Streams
from jetcron.config import Settings
from jetcron.core.clock import Clock
from jetcron.core.models import AgentInfo, Run


class SleepUntilPorts(Protocol):
    clock: Clock


class ResolveSecretsPorts(Protocol):
    publisher: Publisher
    streams: Streams
    settings: Settings


class RunClaimPorts(Protocol):
    settings: Settings
    leases: Leases
    clock: Clock
    stop: asyncio.Event


class ChildPorts(ResolveSecretsPorts, Protocol):
    settings: Settings
    rpc: Rpc
    log: structlog.stdlib.BoundLogger


class AttemptReportsPorts(Protocol):
    settings: Settings
    publisher: Publisher
    clock: Clock


class AttemptPorts(SleepUntilPorts, RunClaimPorts, ChildPorts, AttemptReportsPorts, Protocol):
    settings: Settings
    clock: Clock
    log: structlog.stdlib.BoundLogger


class GangPorts(AttemptPorts, Protocol):
    """A gang member's attempt (gang.py): an attempt's ports, and the run record it watches."""

    settings: Settings
    clock: Clock
    log: structlog.stdlib.BoundLogger
    publisher: Publisher
    runs: Records[Run]


class AgentLivenessPorts(Protocol):
    settings: Settings
    leases: Leases
    stop: asyncio.Event
    log: structlog.stdlib.BoundLogger


class IntakePorts(GangPorts, Protocol):
    """The intake's own reads, and what the attempts it makes (gang members too) are made with."""

    settings: Settings
    clock: Clock
    leases: Leases
    log: structlog.stdlib.BoundLogger


class HeartbeatPorts(Protocol):
    settings: Settings
    clock: Clock
    agents: Records[AgentInfo]
    stop: asyncio.Event
    log: structlog.stdlib.BoundLogger
    """Read by its GPU health check (host/gpu_health.py), with its settings, clock and stop."""


class AgentPorts(AgentLivenessPorts, IntakePorts, HeartbeatPorts, Protocol):
    settings: Settings
    clock: Clock
    log: structlog.stdlib.BoundLogger
    rpc: Rpc

"""What each part of the run tracker uses of its service's Context: one Protocol per part, naming only those ports
(mypy holds each part to its own); the service's main() passes its Context, which satisfies them all."""

from __future__ import annotations

import asyncio
from typing import Protocol

import structlog

from jetcron.bus.lease import Leases
from jetcron.bus.ports import Buckets, Publisher, Records, Rpc, Streams
from jetcron.config import Settings
from jetcron.core.clock import Clock
from jetcron.core.models import AgentInfo, JobRecord, Run
from jetcron.ops.retention import History


class AnnounceMissedPorts(Protocol):
    publisher: Publisher
    settings: Settings


class MissedDeadlinesPorts(AnnounceMissedPorts, Protocol): ...


class DeadLettersPorts(Protocol):
    publisher: Publisher
    clock: Clock


class StandardHooksPorts(MissedDeadlinesPorts, DeadLettersPorts, Protocol): ...


class RecordsPorts(StandardHooksPorts, Protocol):
    """What the tracker's write path (run_tracker.records.Records, not the bus's port) uses."""

    runs: Records[Run]


class AgentLossesPorts(Protocol):
    agents: Records[AgentInfo]
    settings: Settings
    log: structlog.stdlib.BoundLogger


class CheckpointJanitorPorts(Protocol):
    settings: Settings
    log: structlog.stdlib.BoundLogger
    streams: Streams
    runs: Records[Run]


class DeadlinesPorts(AnnounceMissedPorts, Protocol):
    log: structlog.stdlib.BoundLogger
    runs: Records[Run]
    history: History


class FinishedCountsPorts(Protocol):
    clock: Clock
    log: structlog.stdlib.BoundLogger


class JoinMarkUpkeepPorts(Protocol):
    log: structlog.stdlib.BoundLogger


class FlowsPorts(JoinMarkUpkeepPorts, Protocol):
    runs: Records[Run]
    jobs: Records[JobRecord]
    buckets: Buckets
    history: History
    publisher: Publisher
    settings: Settings
    clock: Clock


class PrunerPorts(Protocol):
    runs: Records[Run]
    jobs: Records[JobRecord]
    history: History
    streams: Streams
    clock: Clock
    stop: asyncio.Event
    log: structlog.stdlib.BoundLogger


class StorageKeeperPorts(Protocol):
    settings: Settings
    history: History
    streams: Streams
    log: structlog.stdlib.BoundLogger


class ServeListingPorts(Protocol):
    runs: Records[Run]
    rpc: Rpc
    stop: asyncio.Event


class ProgressPorts(Protocol):
    agents: Records[AgentInfo]
    streams: Streams
    settings: Settings


class ReconcileActionsPorts(Protocol):
    runs: Records[Run]
    leases: Leases
    publisher: Publisher
    log: structlog.stdlib.BoundLogger


class ReconcilerPorts(ReconcileActionsPorts, ProgressPorts, Protocol): ...


class SweeperPorts(Protocol):
    clock: Clock


class StandbyRoundPorts(Protocol):
    clock: Clock
    log: structlog.stdlib.BoundLogger
    stop: asyncio.Event


class ReconcileAsLeaderPorts(SweeperPorts, StandbyRoundPorts, Protocol):
    leases: Leases
    settings: Settings

"""What each part of the api uses of its service's Context: one Protocol per part, naming only those ports (mypy holds
each part to its own); the service's main() passes its Context, which satisfies them all."""

from __future__ import annotations

import asyncio
from typing import Protocol

import structlog

from jetcron.bus.lease import Leases
from jetcron.bus.ports import Buckets, Consumers, Publisher, Records, Rpc, Streams
from jetcron.config import Settings
from jetcron.core.clock import Clock
from jetcron.core.models import AgentInfo, JobRecord, Run, TenantPolicy
from jetcron.core.timing.calendars import CalendarRecord
from jetcron.ops.retention import History
from jetcron.wire.messages import Cursor


class AdmissionPorts(Protocol):
    settings: Settings
    streams: Streams
    tenants: Records[TenantPolicy]
    buckets: Buckets


class AgentsPorts(Protocol):
    agents: Records[AgentInfo]


class CalendarsPorts(Protocol):
    clock: Clock
    calendars: Records[CalendarRecord]
    jobs: Records[JobRecord]


class CapacityCheckPorts(Protocol):
    buckets: Buckets
    clock: Clock


class ClusterPorts(Protocol):
    leases: Leases
    buckets: Buckets
    streams: Streams


class DependentsPorts(Protocol):
    buckets: Buckets
    clock: Clock
    log: structlog.stdlib.BoundLogger
    jobs: Records[JobRecord]
    stop: asyncio.Event


class VisibleRunPorts(Protocol):
    """What runs.visible_run uses."""

    runs: Records[Run]


class DlqPorts(VisibleRunPorts, Protocol):
    streams: Streams
    clock: Clock


class IntakePorts(Protocol):
    buckets: Buckets
    consumers: Consumers
    stop: asyncio.Event
    clock: Clock
    log: structlog.stdlib.BoundLogger


class ManualRunsPorts(Protocol):
    clock: Clock
    history: History
    calendars: Records[CalendarRecord]
    cursors: Records[Cursor]
    runs: Records[Run]


class CheckCeilingPorts(Protocol):
    """What priorities.check_ceiling uses."""

    tenants: Records[TenantPolicy]


class MovePorts(Protocol):
    """What priorities.move uses."""

    runs: Records[Run]
    publisher: Publisher
    clock: Clock
    settings: Settings


class JobValidationPorts(CheckCeilingPorts, Protocol):
    clock: Clock
    settings: Settings
    history: History
    jobs: Records[JobRecord]
    calendars: Records[CalendarRecord]


class JobWritesPorts(CapacityCheckPorts, MovePorts, Protocol):
    streams: Streams
    jobs: Records[JobRecord]
    history: History
    cursors: Records[Cursor]


class JobsPorts(DependentsPorts, JobValidationPorts, JobWritesPorts, ManualRunsPorts, Protocol): ...


class MinterPorts(Protocol):
    settings: Settings
    runs: Records[Run]
    log: structlog.stdlib.BoundLogger


class ServeMintPorts(MinterPorts, Protocol):
    rpc: Rpc


class NotificationsPorts(Protocol):
    buckets: Buckets
    publisher: Publisher
    clock: Clock


class ServeRoomPorts(Protocol):
    streams: Streams
    rpc: Rpc


class RunsPorts(VisibleRunPorts, CheckCeilingPorts, MovePorts, Protocol):
    jobs: Records[JobRecord]
    rpc: Rpc
    leases: Leases
    streams: Streams


class SecretsPorts(Protocol):
    publisher: Publisher
    streams: Streams
    settings: Settings
    clock: Clock


class SubmissionsPorts(Protocol):
    buckets: Buckets


class TenantsPorts(Protocol):
    history: History
    tenants: Records[TenantPolicy]


class TokensPorts(Protocol):
    buckets: Buckets
    clock: Clock


class NounsPorts(RunsPorts, DlqPorts, AgentsPorts, ClusterPorts, TenantsPorts, SecretsPorts, SubmissionsPorts,
                 NotificationsPorts, TokensPorts, CalendarsPorts, Protocol):
    """What service.nouns() uses: the ports of every noun it builds (Jobs comes built)."""

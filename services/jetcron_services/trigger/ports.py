"""What each part of the trigger uses of its service's Context: one Protocol per part, naming only those ports
(mypy holds each part to its own); the service's main() passes its Context, which satisfies them all."""

from __future__ import annotations

import asyncio
from typing import Protocol

import structlog

from jetcron.bus.lease import Leases
from jetcron.bus.ports import Buckets, Records, Rpc
from jetcron.config import Settings
from jetcron.core.clock import Clock
from jetcron.core.models import JobRecord, Run
from jetcron.core.timing.calendars import CalendarRecord
from jetcron.ops.retention import History
from jetcron.wire.messages import Cursor


class FirerPorts(Protocol):
    settings: Settings
    jobs: Records[JobRecord]
    runs: Records[Run]
    cursors: Records[Cursor]
    leases: Leases
    history: History
    rpc: Rpc
    buckets: Buckets
    log: structlog.stdlib.BoundLogger


class MarkKeeperPorts(Protocol):
    cursors: Records[Cursor]
    log: structlog.stdlib.BoundLogger


class TriggerPorts(FirerPorts, MarkKeeperPorts, Protocol):
    calendars: Records[CalendarRecord]
    clock: Clock
    stop: asyncio.Event

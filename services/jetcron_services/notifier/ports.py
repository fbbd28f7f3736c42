"""What each part of the notifier uses of its service's Context: one Protocol per part, naming only those ports
(mypy holds each part to its own); the service's main() passes its Context, which satisfies them all."""

from __future__ import annotations

from typing import Protocol

import structlog

from jetcron.bus.ports import Records
from jetcron.config import Settings
from jetcron.core.clock import Clock
from jetcron.core.models import JobRecord, Run


class NotifierPorts(Protocol):
    settings: Settings
    jobs: Records[JobRecord]
    runs: Records[Run]
    clock: Clock
    log: structlog.stdlib.BoundLogger

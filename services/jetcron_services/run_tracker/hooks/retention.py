"""A run ended: its job's count limits on history are applied soon (jetcron_services.run_tracker.history)."""

from __future__ import annotations

from jetcron.core.models import Run
from jetcron_services.run_tracker.history import Pruner
from jetcron_services.run_tracker.hooks import ended


class Retention:
    def __init__(self, pruner: Pruner) -> None:
        self.pruner = pruner

    async def changed(self, old: Run, new: Run) -> None:
        if ended(old, new):
            self.pruner.noted(new)

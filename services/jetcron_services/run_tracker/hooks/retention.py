"""A run ended: its job's count limits on history are applied soon (jetcron_services.run_tracker.history)."""

from __future__ import annotations

from jetcron.core.models import Run
from jetcron_services.run_tracker.history import Pruner


class Retention:
    def __init__(self, pruner: Pruner) -> None:
        self.pruner = pruner

    async def changed(self, old: Run, new: Run) -> None:
        if new.state.terminal and not old.state.terminal:
            self.pruner.noted(new)

"""A run ended: the flows it belongs to move on (its dependents released, blocked or left waiting)."""

from __future__ import annotations

from jetcron.core.models import Run
from jetcron_services.run_tracker.flows import Flows
from jetcron_services.run_tracker.hooks import ended


class FlowSteps:
    def __init__(self, flows: Flows) -> None:
        self.flows = flows

    async def changed(self, old: Run, new: Run) -> None:
        if ended(old, new):
            await self.flows.on_terminal(new)

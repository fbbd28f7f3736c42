"""A deadline missed: each miss newly recorded on a run is counted and put on the events stream."""

from __future__ import annotations

from jetcron.core.models import Run
from jetcron_services.run_tracker.deadlines import announce_missed
from jetcron_services.run_tracker.ports import MissedDeadlinesPorts


class MissedDeadlines:
    def __init__(self, ctx: MissedDeadlinesPorts) -> None:
        self.ctx = ctx

    async def changed(self, old: Run, new: Run) -> None:
        if len(new.missed) > len(old.missed):
            await announce_missed(self.ctx, new, new.missed[len(old.missed):])

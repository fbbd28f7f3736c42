"""Checkpoint retention: a finished run's checkpoints are removed once its retention period has passed."""

from __future__ import annotations

from datetime import datetime, timedelta

from jetcron.bus.checkpoints import remove_run, saved_runs
from jetcron.core.errors import JetcronError
from jetcron_services.run_tracker.ports import CheckpointJanitorPorts

MAX_EVERY = 60.0


class CheckpointJanitor:
    """Run by the tracker leader. It lists the checkpoint records (only runs that saved one, not all runs) and
    reads each one's run; the state lives in JetStream, so a restarted or new leader carries on."""

    def __init__(self, ctx: CheckpointJanitorPorts) -> None:
        self.ctx = ctx
        self.retention = timedelta(seconds=ctx.settings.checkpoint_retention)
        self.every = timedelta(seconds=min(MAX_EVERY, max(0.5, ctx.settings.checkpoint_retention / 2)))
        self.last: datetime | None = None
        self.removed = 0

    async def maybe_sweep(self, now: datetime) -> None:
        if self.last is not None and now - self.last < self.every:
            return
        self.last = now
        try:
            await self.sweep(now)
        except JetcronError as exc:
            self.ctx.log.warning("checkpoint sweep failed; next time", error=str(exc))

    async def sweep(self, now: datetime) -> int:
        """Remove the checkpoints of every run that ended longer ago than the retention (or is gone); how many."""
        removed = 0
        for saved in await saved_runs(self.ctx.streams):
            found = await self.ctx.runs.maybe(saved.run_id) if saved.run_id else None
            if found is not None:
                run = found[0]
                if not run.state.terminal or (run.finished_at or now) + self.retention > now:
                    continue
            await remove_run(self.ctx.streams, saved)
            removed += 1
        self.removed += removed
        return removed

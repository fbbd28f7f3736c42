"""The tracker's counters of run transitions: retries, dead letters, and finished runs by outcome."""

from __future__ import annotations

from jetcron.core.models import Run, RunState
from jetcron.telemetry import metrics
from jetcron_services.run_tracker.hooks import ended


class RunMetrics:
    async def changed(self, old: Run, new: Run) -> None:
        if new.state is RunState.SCHEDULED and new.attempt > old.attempt:
            metrics.RETRIES.inc()  # its `scheduled` record is its hand-off to placement
        if new.state is RunState.DEAD:
            metrics.DEAD_LETTERED.inc()
        if ended(old, new):
            metrics.child(metrics.RUNS_FINISHED, outcome=new.state.value).inc()

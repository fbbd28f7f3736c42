"""Submit-time warnings from placement's capacity summary: one cached KV read, never a scan of the agents."""

from __future__ import annotations

import time

from jetcron.bus.ports import Records
from jetcron.core.models import JobSpec
from jetcron.core.placing.capacity import CapacitySummary, unsatisfiable
from jetcron.wire import subjects as s
from jetcron_services.api.ports import CapacityCheckPorts

REFRESH = 2.0
STALE = 300.0  # the leader rewrites the summary at least every 30 s


class CapacityCheck:
    def __init__(self, ctx: CapacityCheckPorts) -> None:
        self.ctx = ctx
        self._store: Records[CapacitySummary] | None = None
        self._summary: CapacitySummary | None = None
        self._read_at = float("-inf")

    async def _current(self) -> CapacitySummary | None:
        if time.monotonic() - self._read_at < REFRESH:
            return self._summary
        self._read_at = time.monotonic()
        try:
            if self._store is None:
                self._store = await self.ctx.buckets.open(s.BUCKET_PLACEMENT, CapacitySummary)
            found = await self._store.maybe(s.CAPACITY_KEY)
        except Exception:  # a warning is advice: never fail a submit for want of it (e.g. no bucket yet)
            return self._summary
        self._summary = None if found is None else found[0]
        return self._summary

    async def warnings(self, spec: JobSpec) -> list[str]:
        """["unsatisfiable: ..."] when no registered agent could ever run the job; [] when one might."""
        summary = await self._current()
        if summary is None or (self.ctx.clock.now() - summary.at).total_seconds() > STALE:
            return []  # no leader has refreshed it lately: agents may have joined since
        needs = ["container"] if spec.image else []
        why = unsatisfiable(spec.resources, dict(spec.require), needs, summary)
        if why is None:
            return []
        return [f"unsatisfiable: {why}; its runs will wait until such an agent registers"]

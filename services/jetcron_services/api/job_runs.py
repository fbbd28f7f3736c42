"""Runs of a job made by hand: one now (jobs.trigger), or the occurrences of a past window (jobs.backfill)."""

from __future__ import annotations

from datetime import datetime

from jetcron.core.errors import WriteConflict
from jetcron.core.ids import manual_run_id, run_id
from jetcron.core.lifecycle.runs import new_run
from jetcron.core.models import JobRecord, Run, RunState
from jetcron.core.timing import triggers
from jetcron.telemetry.tracing import current_trace_id
from jetcron_services.api.calendars import job_calendars
from jetcron_services.api.ports import ManualRunsPorts


class ManualRuns:
    def __init__(self, ctx: ManualRunsPorts) -> None:
        self.ctx = ctx

    async def trigger(self, record: JobRecord, key: str, *, keyed: bool) -> Run:
        """A run of the job now, named by `key` (`keyed`: the caller's own, so a retry names the same run)."""
        now = self.ctx.clock.now()
        # A retried request with the same key must hit the same run id: keep the time out of it then.
        stamp = record.created_at if keyed else now
        run = new_run(record.spec, run_id=manual_run_id(record.spec.key, stamp, key), state=RunState.SCHEDULED,
                      scheduled_at=now, due_at=now, now=now, trace_id=current_trace_id(),
                      keep_seconds=await self.ctx.history.keep_for(record.spec))
        return await self._record(run)

    async def backfill(self, record: JobRecord, start: datetime, end: datetime, *, limit: int, rate: int) -> list[Run]:
        """The job's runs for its occurrences from `start` to `end` (at most `limit`), paced at `rate` a second."""
        spec = record.spec
        now = self.ctx.clock.now()
        calendars = await job_calendars(self.ctx.calendars, spec, strict=False)
        planned = triggers.plan_backfill(spec, created_at=record.created_at, start=start, end=end,
                                         now=now, limit=limit, calendars=calendars)
        cursor = await self.ctx.cursors.maybe(spec.key)
        paced = triggers.pace_backfill(spec, planned, now=now, rate_per_second=rate,
                                       active_run=cursor[0].last_run if cursor else "")
        created: list[Run] = []
        keep = await self.ctx.history.keep_for(spec)
        for item in paced:  # see docs/decisions-trigger.md: paced, and chained unless overlap is allow
            fire, state = item.fire, RunState.WAITING if item.after else RunState.SCHEDULED
            reason = f"backfill: waiting for {item.after}" if item.after else "backfill"
            if fire.skip_reason is not None:
                state, reason = RunState.SKIPPED, fire.skip_reason
            run = new_run(spec, run_id=run_id(spec.key, fire.nominal), state=state, scheduled_at=fire.nominal,
                          due_at=fire.due_at, now=now, reason=reason, after=item.after, trace_id=current_trace_id(),
                          keep_seconds=keep)
            created.append(await self._record(run))
        return created

    async def _record(self, run: Run) -> Run:
        """Record a run; a `scheduled` record is its hand-off to placement."""
        try:
            await self.ctx.runs.create(run.run_id, run)
        except WriteConflict:
            existing, _ = await self.ctx.runs.get(run.run_id)
            return existing
        return run

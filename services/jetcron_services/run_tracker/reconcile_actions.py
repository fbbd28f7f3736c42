"""What the reconciler writes once it has judged a run (jetcron.core.lifecycle.reconcile_steps): a retry, a
re-drive, a loss, a release, each only if the run is still where it was seen; and a claim on a run by an agent it
was not placed on, taken away."""

from __future__ import annotations

from contextlib import AbstractContextManager

from opentelemetry.trace import Span

from jetcron.bus.lease import Lease
from jetcron.core.lifecycle import reconcile_steps as step
from jetcron.core.lifecycle.leases import foreign_claim
from jetcron.core.lifecycle.reconcile import Timing, same_step, whole
from jetcron.core.lifecycle.run_state import RunEvent
from jetcron.core.lifecycle.runs import Change
from jetcron.core.models import Run
from jetcron.ops.dispatch import redrive
from jetcron.telemetry import metrics
from jetcron.telemetry.tracing import context_from_trace_id, tracer
from jetcron_services.run_tracker.ports import ReconcileActionsPorts
from jetcron_services.run_tracker.records import Records

_tracer = tracer("run_tracker")


class ReconcileActions:
    def __init__(self, ctx: ReconcileActionsPorts, records: Records, timing: Timing) -> None:
        self.ctx = ctx
        self.records = records
        self.timing = timing

    async def carry_out(self, seen: Run, action: step.Action) -> None:
        """Write what the judgement of `seen` (the record as the sweep found it) decided."""
        run_id = seen.run_id
        match action:
            case step.Retry():
                await self._change(seen, Change(event=RunEvent.RETRY))
            case step.Redrive(times=times):
                run = await self.read_whole(seen)
                if run is None:
                    return
                metrics.child(metrics.REDRIVES, step="scheduled").inc()
                with _span(seen, "redrive"):
                    await redrive(self.ctx.publisher, run, times)
            case step.Lose(loss=loss, reason=reason):
                if loss is step.Loss.NOT_STARTED:
                    metrics.child(metrics.REDRIVES, step="assigned").inc()
                    self.ctx.log.info("assignment not started", run_id=run_id, attempt=seen.attempt, agent=seen.agent)
                else:
                    metrics.LEASES_EXPIRED.inc()
                    if loss is step.Loss.LEASE_EXPIRED:
                        self.ctx.log.info("run lease gone", run_id=run_id, attempt=seen.attempt, agent=seen.agent)
                await self._change(seen, Change(event=RunEvent.LOSE, reason=reason))
            case step.Release():
                await self._change(seen, Change(event=RunEvent.RELEASE))

    async def read_whole(self, seen: Run) -> Run | None:
        """`seen` whole: itself, or its record read back if the index keeps it in its form; None if the record
        has moved on from `seen`'s state and attempt meanwhile (its new revision comes by the watch)."""
        if whole(seen):
            return seen
        found = await self.ctx.runs.maybe(seen.run_id)
        if found is None or not same_step(found[0], seen):
            return None
        return found[0]

    async def still_foreign(self, lease: Lease, run_id: str) -> bool:
        """The claim judged against the run's stored record, not our copy: a copy that lags (the watch behind a
        re-placement, a NATS node lost meanwhile) makes the next attempt's honest claim look foreign."""
        found = await self.ctx.runs.maybe(run_id)
        if found is None:
            return False
        run = found[0]
        return foreign_claim(lease.writer, lease.value.holder, lease.value.attempt, run.agent, run.attempt)

    async def take_away(self, lease: Lease, run: Run) -> None:
        """A claim on this run by an agent it was not placed on (a compromised or broken agent: its credential
        may write claims under its own name only, docs/security.md). Revoked, so that the run's own agent can
        take it; the run is then judged as one whose lease is gone. Counted and logged with the writer's name."""
        metrics.child(metrics.AUTH_FAILURES, kind="foreign_lease").inc()
        self.ctx.log.warning("foreign lease claim revoked", run_id=run.run_id, writer=lease.writer,
                             claimed_attempt=lease.value.attempt, assigned=run.agent, attempt=run.attempt)
        await self.ctx.leases.revoke(lease.key, f"claimed by {lease.writer}, not placed there", self.timing.lease_ttl)

    async def _change(self, seen: Run, change: Change) -> None:
        def make(run: Run) -> Change | None:
            # Act only if the run is still where we saw it; otherwise someone else moved it on.
            return change if same_step(run, seen) else None

        with _span(seen, str(change.event)):
            await self.records.change(seen.run_id, make)


def _span(run: Run, action: str) -> AbstractContextManager[Span]:
    """A retry or re-drive is a further span in the run's own trace (its id is kept on the run record)."""
    return _tracer.start_as_current_span(f"reconcile {action}", context=context_from_trace_id(run.trace_id),
                                         attributes={"jetcron.run_id": run.run_id, "jetcron.job": run.job,
                                                     "jetcron.attempt": run.attempt, "jetcron.state": str(run.state)})

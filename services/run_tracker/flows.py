"""DAG release: when a run ends, start downstream jobs whose upstreams all succeeded in the same flow."""

from __future__ import annotations

import msgspec

from jetcron.bus.dispatch import dispatch
from jetcron.bus.publish import publish
from jetcron.core.errors import JetcronError, NotFound, WriteConflict
from jetcron.core.ids import stamp_of
from jetcron.core.models import JobRecord, JobStatus, Run, RunState
from jetcron.core.retention import stream_ttl
from jetcron.core.run_state import RunEvent
from jetcron.core.runs import Change, apply, new_run
from jetcron.services.runtime import Context
from jetcron.telemetry import metrics
from jetcron.wire import subjects as s
from jetcron.wire.codec import encode


def flow_stamp(run: Run) -> str:
    """Every run of one flow shares the root occurrence's stamp: <job key>.<stamp> names each job's run."""
    return stamp_of(run.flow_id or run.run_id)


class Flows:
    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.jobs: dict[str, JobRecord] = {}
        self.downstream: dict[str, set[str]] = {}

    async def watch_jobs(self) -> None:
        async for name, record, _ in self.ctx.jobs.watch():
            if not name:
                continue
            old = self.jobs.pop(name, None)
            if old is not None:
                for up in old.spec.upstream_keys():
                    self.downstream.get(up, set()).discard(name)
            if record is not None and record.status is JobStatus.ACTIVE:
                self.jobs[name] = record
                for up in record.spec.upstream_keys():
                    self.downstream.setdefault(up, set()).add(name)

    async def on_terminal(self, run: Run) -> None:
        for name in sorted(self.downstream.get(run.job, ())):
            record = self.jobs.get(name)
            if record is not None:
                await self._consider(record, run)

    async def _consider(self, record: JobRecord, ended: Run) -> None:
        stamp = flow_stamp(ended)
        run_id = f"{record.spec.key}.{stamp}"
        if ended.state is not RunState.SUCCEEDED:
            await self._create(record, ended, run_id, RunState.BLOCKED,
                               f"upstream {ended.job} run {ended.run_id} ended {ended.state}")
            return
        pending: list[str] = []
        for up in record.spec.upstream_keys():
            found = await self.ctx.runs.maybe(f"{up}.{stamp}")
            if found is None or found[0].state is not RunState.SUCCEEDED:
                pending.append(up if found is None else f"{up} ({found[0].state})")
        if pending:
            # Recorded now, so `runs list` shows what it waits for; the last upstream's ending releases it.
            await self._create(record, ended, run_id, RunState.WAITING,
                               f"waiting on upstream jobs: {', '.join(pending)}")
            return
        await self._create(record, ended, run_id, RunState.SCHEDULED, "")

    async def _create(self, record: JobRecord, ended: Run, run_id: str, state: RunState, reason: str) -> None:
        now = self.ctx.clock.now()
        spec = record.spec
        run = new_run(spec, run_id=run_id, state=state, scheduled_at=ended.scheduled_at, due_at=now, now=now,
                      reason=reason, flow_id=ended.flow_id or ended.run_id, trace_id=ended.trace_id,
                      keep_seconds=await self.ctx.history.keep_for(spec))
        try:
            await self.ctx.runs.create(run_id, run)
        except WriteConflict:
            # Created by the other upstream's ending, or by an earlier try of ours: move it on if it waits.
            await self._move_waiting(run_id, state, reason)
            return
        except JetcronError:
            raise
        if state is RunState.WAITING:
            return
        if state is RunState.SCHEDULED:
            await dispatch(self.ctx.js, run)
            return
        await self._blocked(run)

    async def _blocked(self, run: Run) -> None:
        """A blocked run is terminal from birth: say so on the events stream, count it, and block its own
        downstream in turn."""
        await publish(self.ctx.js, s.event_subject("blocked", s.TRACKER_SOURCE), encode(run),
                      msg_id=s.msg_id(run.run_id, 1, "blocked"),
                      ttl=stream_ttl(run.keep_seconds, self.ctx.settings.history))
        metrics.child(metrics.RUNS_FINISHED, outcome=RunState.BLOCKED.value).inc()
        await self.on_terminal(run)

    async def _move_waiting(self, run_id: str, state: RunState, reason: str) -> None:
        """A downstream run recorded as waiting: release it, block it, or refresh what it waits on (CAS)."""
        event = {RunState.SCHEDULED: RunEvent.RELEASE, RunState.BLOCKED: RunEvent.BLOCK}.get(state)
        now = self.ctx.clock.now()

        def decide(run: Run) -> Run | None:
            if run.state is not RunState.WAITING:
                return None  # released, blocked or cancelled already
            if event is None:
                return msgspec.structs.replace(run, reason=reason)
            return apply(run, Change(event=event, reason=reason), now)

        try:
            changed = await self.ctx.runs.change(run_id, decide)
        except NotFound:
            return
        if changed is None:
            return
        new = changed[1]
        if new.state is RunState.SCHEDULED:
            await dispatch(self.ctx.js, new)
        elif new.state is RunState.BLOCKED:
            await self._blocked(new)

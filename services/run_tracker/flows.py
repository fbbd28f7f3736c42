"""DAG release: when a run ends, start downstream jobs whose upstreams all succeeded in the same flow."""

from __future__ import annotations

from jetcron.bus.dispatch import dispatch
from jetcron.bus.publish import publish
from jetcron.core.errors import JetcronError, WriteConflict
from jetcron.core.models import JobRecord, JobStatus, Run, RunState
from jetcron.services.runtime import Context
from jetcron.wire import subjects as s
from jetcron.wire.codec import encode


def flow_stamp(run: Run) -> str:
    """Every run of one flow shares the root occurrence's stamp: JOB.<stamp> names each job's run."""
    return (run.flow_id or run.run_id).split(".", 1)[1]


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
                for up in old.spec.depends_on:
                    self.downstream.get(up, set()).discard(name)
            if record is not None and record.status is JobStatus.ACTIVE:
                self.jobs[name] = record
                for up in record.spec.depends_on:
                    self.downstream.setdefault(up, set()).add(name)

    async def on_terminal(self, run: Run) -> None:
        for name in sorted(self.downstream.get(run.job, ())):
            record = self.jobs.get(name)
            if record is not None:
                await self._consider(record, run)

    async def _consider(self, record: JobRecord, ended: Run) -> None:
        stamp = flow_stamp(ended)
        run_id = f"{record.spec.name}.{stamp}"
        if ended.state is not RunState.SUCCEEDED:
            await self._create(record, ended, run_id, RunState.BLOCKED,
                               f"upstream {ended.job} run {ended.run_id} ended {ended.state}")
            return
        for up in record.spec.depends_on:
            found = await self.ctx.runs.maybe(f"{up}.{stamp}")
            if found is None or found[0].state is not RunState.SUCCEEDED:
                return  # another upstream has not succeeded (yet); its ending will call us again
        await self._create(record, ended, run_id, RunState.SCHEDULED, "")

    async def _create(self, record: JobRecord, ended: Run, run_id: str, state: RunState, reason: str) -> None:
        now = self.ctx.clock.now()
        spec = record.spec
        run = Run(run_id=run_id, job=spec.name, tenant=spec.tenant, state=state, scheduled_at=ended.scheduled_at,
                  due_at=now, created_at=now, spec=spec, reason=reason, flow_id=ended.flow_id or ended.run_id,
                  trace_id=ended.trace_id, finished_at=now if state.terminal else None,
                  outcome="blocked" if state is RunState.BLOCKED else "")
        try:
            await self.ctx.runs.create(run_id, run)
        except WriteConflict:
            return  # created by the other upstream's ending, or by an earlier try of ours
        except JetcronError:
            raise
        if state is RunState.SCHEDULED:
            await dispatch(self.ctx.js, run)
            return
        await publish(self.ctx.js, s.event_subject("blocked"), encode(run), msg_id=s.msg_id(run_id, 1, "blocked"))
        await self.on_terminal(run)

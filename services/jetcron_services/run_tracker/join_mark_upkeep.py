"""The upkeep of the `latest` joins' marks (jetcron.core.lifecycle.join_marks, libs/jetcron/ops/joins.py): every
replica raises those its runs watch shows are behind, and drops those no job raises any more."""

from __future__ import annotations

import asyncio

from jetcron.core.errors import JetcronError
from jetcron.core.lifecycle.join_marks import JoinMark, Mark, mark_key, marks_of, raised
from jetcron.core.models import JobRecord, JobStatus, Run
from jetcron.ops.joins import Joins
from jetcron_services.run_tracker.flow_jobs import FlowJobs, latest_join
from jetcron_services.run_tracker.ports import JoinMarkUpkeepPorts

REPAIR_RETRY = 1.0
"""Seconds before marks that could not be raised are tried again."""
EARLY_AT_MOST = 10_000
"""Marks kept from the records the runs watch delivers before the jobs watch has caught up (`JoinMarkUpkeep.seen`).
Past it, the marks of every job in a flow are read again from its newest records once it has (a bounded read each),
rather than holding one entry per job of a cluster whose runs came in first."""

Queued = dict[str, tuple[Mark, str, JoinMark | None]]


class JoinMarkUpkeep:
    def __init__(self, ctx: JoinMarkUpkeepPorts, joins: Joins, flows: FlowJobs) -> None:
        self.ctx = ctx
        self.joins = joins
        self.flows = flows
        self.repairs: Queued = {}
        """Marks to raise from the records the runs watch delivered, by mark key (the highest seen; None: read it
        again from the job's newest records)."""
        self._early: Queued = {}
        """Marks from records delivered before the jobs watch said which jobs are in flows (see `seen`)."""
        self._early_overflowed = False
        self._wake = asyncio.Event()

    async def forget_left(self, name: str, old: JobRecord | None, new: JobRecord | None,
                          stored: JobRecord | None) -> None:
        """Drop the marks no one raises any more: when a job stops being an active `latest` join (paused, deleted,
        changed), its RAN, and an upstream's OK once it is left without one. Kept, they would go stale while it is out
        and be read as current if it came back; dropped, they are made again from its newest records when it does.
        A WAITING mark stays until the job is deleted: it only names a run, whose record says whether it still
        waits, and one older than a job's newest records could not be found again."""
        gone: list[tuple[Mark, str]] = []
        if latest_join(old) and not latest_join(new):
            gone.append((Mark.RAN, name))
        deleted = stored is None or stored.status is JobStatus.DELETED
        if deleted and (latest_join(old) or latest_join(stored)):  # a paused job deleted was not held: its record says
            gone.append((Mark.WAITING, name))
        if latest_join(old):
            assert old is not None
            gone += [(Mark.OK, up) for up in old.spec.upstream_keys() if not self.flows.latest_downstream.get(up)]
        for mark, job in gone:
            try:
                await self.joins.forget(mark, job)
            except JetcronError as exc:
                self.ctx.log.warning("join mark not dropped", job=job, mark=mark.value, error=str(exc))

    def seen(self, run: Run) -> None:
        """A run record from the runs watch (every replica sees each): a mark it gives that this replica has not
        seen raised is queued to be raised, so that a service that stored the record and died before raising the
        mark is made good by whichever replica sees the record. Before the jobs watch has said which jobs are in
        flows, the marks are kept (the highest of each) and judged once it has."""
        synced = self.flows.synced.is_set()
        if synced:
            upstream = bool(self.flows.latest_downstream.get(run.job))
            dependent = latest_join(self.flows.jobs.get(run.job))
        else:  # any success may be an upstream's; a dependent's run says so in its own copy of the spec
            upstream, dependent = True, run.spec is not None and bool(run.spec.depends_on)
        if not (upstream or dependent):
            return
        for mark, value in marks_of(run, upstream=upstream, dependent=dependent):
            if raised(mark, self.joins.known.get(mark_key(mark, run.job)), value) is None:
                continue
            if synced:
                _queue(self.repairs, mark, run.job, value)
                self._wake.set()
            elif len(self._early) < EARLY_AT_MOST or mark_key(mark, run.job) in self._early:
                _queue(self._early, mark, run.job, value)
            else:
                self._early_overflowed = True

    def judge_early(self) -> None:
        """The jobs watch has caught up: queue the early marks of the jobs in flows, drop the rest; past
        EARLY_AT_MOST, read every flow job's marks again from its records instead."""
        if self._early_overflowed:
            for up, dependents in self.flows.latest_downstream.items():
                if dependents:
                    _queue(self.repairs, Mark.OK, up, None)
            for job in [key for key, record in self.flows.jobs.items() if latest_join(record)]:
                _queue(self.repairs, Mark.RAN, job, None)
                _queue(self.repairs, Mark.WAITING, job, None)
        else:
            flows = self.flows
            for mark, job, value in self._early.values():
                if bool(flows.latest_downstream.get(job)) if mark is Mark.OK else latest_join(flows.jobs.get(job)):
                    _queue(self.repairs, mark, job, value)
        self._early, self._early_overflowed = {}, False
        self._wake.set()

    async def repair(self) -> None:
        """Raise the marks `seen` queued (for ever; each raise is a compare-and-set, a no-op where one stands)."""
        while True:
            await self._wake.wait()
            self._wake.clear()
            while self.repairs:
                key = next(iter(self.repairs))
                mark, job, value = self.repairs.pop(key)
                try:
                    if value is None:
                        await self.joins.refresh(mark, job)
                    else:
                        await self.joins.raise_to(mark, job, value)
                except JetcronError as exc:
                    self.ctx.log.warning("join mark not repaired; trying again", job=job, mark=mark.value,
                                         error=str(exc))
                    self.repairs.setdefault(key, (mark, job, value))
                    await asyncio.sleep(REPAIR_RETRY)


def _queue(queue: Queued, mark: Mark, job: str, value: JoinMark | None) -> None:
    key = mark_key(mark, job)
    queued = queue.get(key)
    if queued is None or value is None or (queued[2] is not None and raised(mark, queued[2], value) is not None):
        queue[key] = (mark, job, value)

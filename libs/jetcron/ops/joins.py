"""A `latest` join's questions (jetcron.core.lifecycle.dag.not_since decides): when a dependent job last took its
upstreams' successes, when each upstream last succeeded, and the dependent's run waiting on them. Shared by the trigger
(an occurrence of a job with its own schedule is recorded waiting, ready or skipped) and the run tracker (an upstream's
success releases a waiting run, or starts one; its runs watch repairs the marks: jetcron_services.run_tracker.flows).

Each answer is a mark in jc_joins (jetcron.core.lifecycle.join_marks), one read whatever the job's history, raised by
whoever records the run it follows. Where none is stored yet (runs recorded by a release that kept none, a job that has
just joined a flow), it is read once from the job's newest records and stored."""

from __future__ import annotations

from datetime import datetime

import structlog

from jetcron.bus.ports import Buckets, Records
from jetcron.core.errors import JetcronError, NotFound, WriteConflict
from jetcron.core.lifecycle.dag import not_since
from jetcron.core.lifecycle.join_marks import JoinMark, Mark, from_newest, mark_key, marks_of, raised, waits
from jetcron.core.lifecycle.run_state import RunEvent
from jetcron.core.lifecycle.runs import Change, apply
from jetcron.core.models import JobSpec, Run, RunState
from jetcron.wire import subjects as s

READ_AT_MOST = 64
"""Records read to make a mark where none is stored (jetcron.core.lifecycle.join_marks.from_newest), once per job and
mark."""
RAISE_TRIES = 8


def upstream_wait(pending: list[str]) -> str:
    """A waiting run's reason."""
    return f"waiting on upstream jobs: {', '.join(pending)} (no success since this job last ran)"


class Joins:
    def __init__(self, runs: Records[Run], buckets: Buckets, log: structlog.stdlib.BoundLogger) -> None:
        self.runs = runs
        self.buckets = buckets
        self.log = log
        self._store: Records[JoinMark] | None = None
        self.known: dict[str, JoinMark] = {}
        """The marks this process last read or wrote, by key. A mark only rises, so a record whose mark is no higher
        needs no look (one dropped since by another replica is made again from the records when next read)."""

    async def store(self) -> Records[JoinMark]:
        if self._store is None:
            self._store = await self.buckets.open(s.BUCKET_JOINS, JoinMark)
        return self._store

    async def mark(self, mark: Mark, job: str) -> JoinMark:
        """The job's mark: stored, or made from its newest records and stored."""
        found = await (await self.store()).maybe(mark_key(mark, job))
        if found is not None:
            self.known[mark_key(mark, job)] = found[0]
            return found[0]
        newest, more = await self._newest(job)
        return await self.raise_to(mark, job, from_newest(mark, newest, more))

    async def refresh(self, mark: Mark, job: str) -> None:
        """Raise the job's mark to what its newest records say, where they say anything (a tracker that could not
        keep every record its runs watch delivered before it knew the flows' jobs)."""
        newest, _ = await self._newest(job)
        value = from_newest(mark, newest, more=False)
        if value != JoinMark():
            await self.raise_to(mark, job, value)

    async def _newest(self, job: str) -> tuple[list[Run], bool]:
        """The job's newest READ_AT_MOST records, newest first, and whether it has older ones."""
        keys = sorted(await self.runs.keys(s.runs_of_job_filter(job)), reverse=True)
        newest = [run[0] for key in keys[:READ_AT_MOST] if (run := await self.runs.maybe(key)) is not None]
        return newest, len(keys) > READ_AT_MOST

    async def raise_to(self, mark: Mark, job: str, value: JoinMark) -> JoinMark:
        """Raise the job's mark to `value` unless it stands there or higher (a compare-and-set, so writers that race
        or come late never lower it); the mark as it now stands."""
        store, key = await self.store(), mark_key(mark, job)
        for _ in range(RAISE_TRIES):
            found = await store.maybe(key)
            new = raised(mark, found[0] if found else None, value)
            try:
                if new is None:
                    assert found is not None  # raised() is never None over nothing stored
                    new = found[0]
                elif found is None:
                    await store.create(key, new)
                else:
                    await store.update(key, new, found[1])
            except WriteConflict:
                continue  # another writer moved it: judged again on what it wrote
            self.known[key] = new
            return new
        raise WriteConflict(f"join mark {key}: raised by others {RAISE_TRIES} times while this tried")

    async def recorded(self, run: Run, *, upstream: bool = False) -> None:
        """A run of a `latest` join (or, `upstream`, of one of its upstreams) was stored: raise the marks its record
        gives. A failure is logged, not raised: the run is stored, and the run tracker's watch of the runs repairs the
        mark from its record (jetcron_services.run_tracker.flows.Flows.seen)."""
        for mark, value in marks_of(run, upstream=upstream, dependent=not upstream):
            try:
                await self.raise_to(mark, run.job, value)
            except JetcronError as exc:
                self.log.warning("join mark not raised; the run tracker repairs it", job=run.job, mark=mark.value,
                                     run_id=run.run_id, error=str(exc))

    async def forget(self, mark: Mark, job: str) -> None:
        """Drop a mark no one keeps raising (its job left every flow): made again from the records if it rejoins."""
        key = mark_key(mark, job)
        self.known.pop(key, None)
        await (await self.store()).delete(key)

    async def waiting_run(self, job: str) -> Run | None:
        """The job's run waiting on its upstreams, if it still waits. One that has moved on and ran (released a
        moment ago by another service, whose mark may not be raised yet) raises the job's RAN mark here, so the
        readiness read next counts its release."""
        marked = await self.mark(Mark.WAITING, job)
        found = await self.runs.maybe(marked.run_id) if marked.run_id else None
        if found is None:
            return None
        if waits(found[0]) is not None:
            return found[0]
        await self.recorded(found[0])
        return None

    async def readiness(self, spec: JobSpec) -> tuple[list[str], datetime | None]:
        """The upstream job keys (join: latest) without a success since the job last ran, and the newest of their
        latest successes: what a run they release is named after, so that two trackers releasing it at once name
        the same run (its create is the gate)."""
        since = (await self.mark(Mark.RAN, spec.key)).at
        ups = spec.upstream_keys()
        succeeded = {up: (await self.mark(Mark.OK, up)).at for up in ups}
        times = [at for at in succeeded.values() if at is not None]
        return not_since(ups, succeeded, since), max(times) if times else None

    async def release(self, run_id: str, now: datetime, reason: str = "") -> Run | None:
        """Release a waiting run (a compare-and-set: released once, whoever else tries), raise its job's RAN mark
        and hand it to placement; the released run, or None when it was no longer waiting."""

        def decide(run: Run) -> Run | None:
            if run.state is not RunState.WAITING:
                return None
            return apply(run, Change(event=RunEvent.RELEASE, reason=reason), now)

        try:
            changed = await self.runs.change(run_id, decide)
        except NotFound:
            return None
        if changed is None:
            return None
        await self.recorded(changed[1])  # its `scheduled` record is its hand-off to placement
        return changed[1]

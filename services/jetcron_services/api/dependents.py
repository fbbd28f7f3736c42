"""The jobs that depend on a job, and the check every change of a flow's job needs: that no job joined on the same
occurrence downstream of it is left with roots on different schedules (their occurrences would never meet, so its
runs would wait for ever).

The edges are kept in jc_joins, one key each (jetcron.core.lifecycle.join_marks.dependent_key), so a job's dependents
are one listing the server filters, however many jobs its tenant has. Each is written before the job that names it and
removed after the job stops naming it: a crash in between leaves an edge too many, never one too few, and an edge is
read against the dependent's stored record (one it no longer names is passed over). Jobs stored before the edges were
kept get theirs once, at the api's start (`backfill`)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

from jetcron.bus.ports import Records
from jetcron.core.errors import JetcronError, WriteConflict
from jetcron.core.ids import JOB_NAME_RE, job_key
from jetcron.core.lifecycle import dag
from jetcron.core.lifecycle.join_marks import DEPENDENTS, JoinMark, dependent_key, dependents_filter
from jetcron.core.models import JobRecord, JobSpec, JobStatus, JoinPolicy, Schedule, ScheduleKind
from jetcron.wire import subjects as s
from jetcron_services.api.ports import DependentsPorts

READ_AT_MOST = 1000
"""Jobs read for one check, upstream and downstream together (the cycle check's bound: JobValidation._graph)."""
BACKFILLED = f"{DEPENDENTS}._backfilled"
"""Written once every job stored before the edges were kept has had its edges written."""
BACKFILL_BATCH = 256
BACKFILL_RETRY = 5.0


def describe(schedule: Schedule) -> str:
    """A schedule as a refusal names it."""
    if schedule.kind is ScheduleKind.EVERY:
        return f"every {schedule.every_seconds or 0:g} s"
    if schedule.kind is ScheduleKind.CRON:
        return f"cron {schedule.cron!r} ({schedule.tz})"
    if schedule.kind is ScheduleKind.AT:
        return f"at {schedule.at.isoformat() if schedule.at else '?'}"
    return "now"


class Dependents:
    def __init__(self, ctx: DependentsPorts) -> None:
        self.ctx = ctx
        self._store: Records[JoinMark] | None = None

    async def store(self) -> Records[JoinMark]:
        if self._store is None:
            self._store = await self.ctx.buckets.open(s.BUCKET_JOINS, JoinMark)
        return self._store

    async def add(self, spec: JobSpec) -> None:
        """Before `spec` is stored: an edge for each job it depends on (a value: when it was written)."""
        store, now = await self.store(), self.ctx.clock.now()
        for up in spec.depends_on:
            await store.put(dependent_key(spec.tenant, up, spec.name), JoinMark(at=now))

    async def drop(self, spec: JobSpec, kept: Iterable[str] = ()) -> None:
        """After `spec` was changed or deleted: the edges of the jobs it no longer depends on (`kept`: those it still
        does). Best effort: an edge left behind is passed over when read."""
        store = await self.store()
        for up in set(spec.depends_on) - set(kept):
            try:
                await store.delete(dependent_key(spec.tenant, up, spec.name))
            except JetcronError as exc:
                self.ctx.log.warning("dependency edge not removed", job=spec.key, upstream=up, error=str(exc))

    async def of(self, tenant: str, name: str) -> list[str]:
        """The names of the jobs with an edge to `name` (read each one's record to be sure it still depends on it),
        sorted. A listing names removed keys too (their delete markers): each edge is read."""
        store = await self.store()
        keys = await store.keys(dependents_filter(tenant, name))
        return sorted([key.rsplit(".", 1)[1] for key in keys if await store.maybe(key) is not None])

    async def never_met(self, spec: JobSpec, *, itself: bool) -> tuple[str, list[str], dict[str, Schedule]] | None:
        """With `spec` stored as given: the first job joined on the same occurrence downstream of it (and `spec`
        itself, `itself`) whose upstreams would come from roots on different schedules, those roots and their
        schedules; None when every such join still meets. Reads at most READ_AT_MOST jobs: the dependents named by
        the edges (one listing per job), and the upstreams of those joined on the same occurrence."""
        specs: dict[str, JobSpec | None] = {spec.name: spec}

        async def load(name: str) -> JobSpec | None:
            if name not in specs and len(specs) < READ_AT_MOST and JOB_NAME_RE.fullmatch(name):
                found = await self.ctx.jobs.maybe(job_key(spec.tenant, name))
                keep = found is not None and found[0].status is not JobStatus.DELETED \
                    and found[0].spec.tenant == spec.tenant
                specs[name] = found[0].spec if found is not None and keep else None
            return specs.get(name)

        joined: list[str] = [spec.name] if itself else []
        todo, seen = [spec.name], {spec.name}
        while todo:
            name = todo.pop(0)
            for down in await self.of(spec.tenant, name):
                found = await load(down) if down not in seen else None
                if found is None or name not in found.depends_on:
                    continue  # gone, another tenant's, already walked, or an edge a later change removed
                seen.add(down)
                todo.append(down)
                joined.append(down)
        for name in joined:
            found = specs.get(name)
            if found is None or not found.depends_on or dag.join_of(found) is not JoinPolicy.SAME_OCCURRENCE:
                continue
            graph: dict[str, list[str]] = {}
            schedules: dict[str, Schedule] = {}
            walk = [name]
            while walk:
                job = walk.pop()
                upstream = await load(job)
                if job in graph or upstream is None:
                    continue
                graph[job] = list(upstream.depends_on)
                schedules[job] = upstream.schedule
                walk.extend(upstream.depends_on)
            apart = dag.roots_apart(graph, name, schedules)
            if apart is not None:
                return name, apart, {root: schedules[root] for root in apart if root in schedules}
        return None

    async def backfill(self) -> None:
        """Write the edges of every job stored before edges were kept, once for the cluster (each replica that
        starts before it is done does it too: the same puts); tried again until it is done."""
        while not self.ctx.stop.is_set():
            try:
                await self._backfill()
                return
            except JetcronError as exc:
                self.ctx.log.warning("dependency edges of earlier jobs not written yet; trying again", error=str(exc))
                await asyncio.sleep(BACKFILL_RETRY)

    async def _backfill(self) -> None:
        store = await self.store()
        if await store.maybe(BACKFILLED) is not None:
            return
        keys = await self.ctx.jobs.keys()

        def dependent(record: JobRecord) -> bool:
            return bool(record.spec.depends_on) and record.status is not JobStatus.DELETED

        for start in range(0, len(keys), BACKFILL_BATCH):
            records, _ = await self.ctx.jobs.page(keys[start:start + BACKFILL_BATCH], BACKFILL_BATCH, dependent)
            for record in records:
                await self.add(record.spec)
        try:
            await store.create(BACKFILLED, JoinMark(at=self.ctx.clock.now()))
        except WriteConflict:
            pass  # another replica finished first


def refusal(changed: str, dependent: str, roots: list[str], schedules: dict[str, Schedule]) -> str:
    """Why a change is refused: the flow it would leave waiting for ever."""
    named = ", ".join(f"{root} ({describe(schedules[root])})" if root in schedules else root for root in roots)
    about = f"job {dependent!r}" if dependent != changed else "this job"
    return (f"{about} joins its upstreams on the same occurrence, and its flow would start from {named}, which fire "
            f"on different schedules: no occurrence of one is an occurrence of another, so its runs would wait for "
            f"ever; give {', '.join(roots)} one schedule, or make {dependent!r} join: latest")

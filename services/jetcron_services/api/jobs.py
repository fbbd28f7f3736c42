"""Job verbs: create, update, get, list, pause, resume, delete, trigger, backfill. Each reads its request here; what
a spec must satisfy is jetcron_services.api.job_validation, the record's writes jetcron_services.api.job_writes, the
runs made by hand jetcron_services.api.job_runs."""

from __future__ import annotations

import secrets

from jetcron.core.errors import Conflict, InvalidSpec, NotFound
from jetcron.core.ids import QUEUE_RE
from jetcron.core.lifecycle import dag
from jetcron.core.models import JobRecord, JobStatus, Run
from jetcron.core.timing import exclusions
from jetcron.wire import subjects as s
from jetcron.wire import verbs as v
from jetcron.wire.api import JobView, Page
from jetcron_services.api.admission import Admission
from jetcron_services.api.calendars import fire_times, job_calendars
from jetcron_services.api.call import Call, job_named, visible
from jetcron_services.api.dependents import Dependents
from jetcron_services.api.job_runs import ManualRuns
from jetcron_services.api.job_validation import JobValidation
from jetcron_services.api.job_writes import JobWrites
from jetcron_services.api.key_listing import KeyListing
from jetcron_services.api.ports import JobsPorts
from jetcron_services.api.registry import Noun, verb
from jetcron_services.api.requests import body, flag, instant, integer, text


class Jobs(Noun):
    noun = "jobs"

    def __init__(self, ctx: JobsPorts, admission: Admission) -> None:
        self.ctx = ctx
        self.admission = admission
        self.listing = KeyListing(ctx.jobs)
        self.dependents = Dependents(ctx)
        self.validation = JobValidation(ctx, self.dependents)
        self.writes = JobWrites(ctx, self.dependents)
        self.runs = ManualRuns(ctx)

    async def _job(self, name: str | None, tenant: str | None) -> tuple[JobRecord, int]:
        """A live job the caller may see, by the name it knows: a tenant names its own jobs; the admin names a
        job by its key (`tenant.name`, or the bare name of a default-tenant job). Another tenant's job reads
        exactly like a missing one."""
        return await self._stored(job_named(name, tenant), name or "", tenant)

    async def _stored(self, key: str, name: str, tenant: str | None) -> tuple[JobRecord, int]:
        try:
            record, revision = await self.ctx.jobs.get(key)
        except NotFound:
            raise NotFound("job", name) from None
        if record.status is JobStatus.DELETED or not visible(record.spec.tenant, tenant):
            raise NotFound("job", name)
        return record, revision

    @verb
    async def create(self, call: Call) -> JobRecord:
        req = body(call.data, v.JobsCreate)
        spec, digest = await self.validation.validated(req["spec"], call.tenant)
        await self.validation.calendars_ok(spec, self.ctx.clock.now())
        # A name made again: jobs stored with it in their depends_on join this one.
        await self.validation.flows_meet(spec, "schedule")
        await self.admission.admit(spec.tenant)
        return await self.writes.create(spec, digest, text(req, "idempotency_key", limit=128))

    @verb
    async def update(self, call: Call) -> JobRecord:
        """Replace a job's spec; with `expected_version`, only if the job is still at that version (a client that
        read, changed and wrote it back must not undo a change made in between)."""
        req = body(call.data, v.JobsUpdate)
        expected = integer(req, "expected_version", 0, 0, 2**53) or None
        spec, digest = await self.validation.validated(req["spec"], call.tenant)
        old, revision = await self._stored(spec.key, spec.name, call.tenant)
        if expected is not None and old.version != expected:
            raise Conflict(f"job {spec.name!r} is at version {old.version}, not {expected}: it changed since it was "
                           "read; read it again and retry")
        await self.validation.calendars_ok(spec, old.created_at)
        await self.validation.flows_meet(spec, "schedule" if spec.schedule != old.spec.schedule
                                         else "depends_on" if spec.depends_on != old.spec.depends_on else "schedule")
        record = await self.writes.update(old, revision, spec, digest)
        if flag(req, "apply_to_waiting"):
            await self.writes.move_waiting(spec, call.tenant)
        return record

    @verb
    async def get(self, call: Call) -> JobView:
        req = body(call.data, v.JobsGet)
        record, _ = await self._job(text(req, "name"), call.tenant)
        count = integer(req, "count", 5, 0, 100)
        waits = dag.wait_timeout(record.spec)
        if not count:
            return JobView(job=record, wait_timeout_seconds=waits)
        # The next `count` fire times, with the occurrences a DST gap or a calendar skips between them.
        calendars = await job_calendars(self.ctx.calendars, record.spec, strict=False)
        rows = exclusions.preview(record.spec.schedule, self.ctx.clock.now(), count, created_at=record.created_at,
                                  calendars=calendars)
        return JobView(job=record, next_fires=fire_times(rows), wait_timeout_seconds=waits)

    @verb
    async def list(self, call: Call) -> Page[JobRecord]:
        req = body(call.data, v.JobsList)
        limit = integer(req, "limit", 100, 1, 1000)
        queue = text(req, "queue")
        if queue is not None and not QUEUE_RE.fullmatch(queue):
            raise InvalidSpec("queue", queue, "must be 1-63 letters, digits, '-' or '_'")
        after = text(req, "cursor") or ""
        names = await self.listing.after(s.jobs_of_tenant_filter(call.tenant), after)
        include_deleted = bool(req.get("include_deleted"))

        def keep(record: JobRecord) -> bool:
            return ((include_deleted or record.status is not JobStatus.DELETED)
                    and visible(record.spec.tenant, call.tenant) and queue in (None, record.spec.queue))

        items, cursor = await self.ctx.jobs.page(names, limit, keep)
        return Page(items=items, next_cursor=cursor)

    async def _set_status(self, call: Call, status: JobStatus) -> JobRecord:
        req = body(call.data, v.Named)
        name = text(req, "name")
        record, revision = await self._job(name, call.tenant)
        asked = name or record.spec.key  # _job refused a missing name
        now = self.ctx.clock.now()
        # Only the api changes a job made with its end, and its first change settles it: a stored copy that is
        # still one is the record read here, at this revision.
        fired = await self.writes.fired(record, revision)
        if status is JobStatus.ACTIVE and record.status is not JobStatus.ACTIVE:
            # Its flow may have changed while it was paused (records of an earlier release were never checked).
            await self.validation.flows_meet(record.spec, "schedule", itself=True)
        return await self.writes.set_status(record, revision, status, asked=asked, now=now, fired=fired)

    @verb
    async def pause(self, call: Call) -> JobRecord:
        return await self._set_status(call, JobStatus.PAUSED)

    @verb
    async def resume(self, call: Call) -> JobRecord:
        return await self._set_status(call, JobStatus.ACTIVE)

    @verb
    async def delete(self, call: Call) -> JobRecord:
        return await self._set_status(call, JobStatus.DELETED)

    @verb
    async def trigger(self, call: Call) -> Run:
        req = body(call.data, v.JobsTrigger)
        record, _ = await self._job(text(req, "name"), call.tenant)
        await self.admission.admit(record.spec.tenant)
        key = text(req, "key", limit=128) or secrets.token_hex(8)
        return await self.runs.trigger(record, key, keyed="key" in req)

    @verb
    async def backfill(self, call: Call) -> Page[Run]:
        req = body(call.data, v.JobsBackfill)
        record, _ = await self._job(text(req, "name"), call.tenant)
        await self.admission.admit(record.spec.tenant)
        start, end = instant(req, "from"), instant(req, "to")
        limit = integer(req, "limit", 1000, 1, 10000)
        rate = integer(req, "rate", 100, 1, 1000)
        return Page(items=await self.runs.backfill(record, start, end, limit=limit, rate=rate))

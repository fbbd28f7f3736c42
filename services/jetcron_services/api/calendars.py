"""Calendar verbs: create, update, get, list, delete, preview (docs/calendars.md); and a job's calendars read for
the job verbs (`job_calendars`). A tenant reaches its own calendars only: another tenant's reads as unknown."""

from __future__ import annotations

import asyncio
import time
from datetime import datetime
from typing import Any

import msgspec

from jetcron.bus.ports import Records
from jetcron.core.errors import Conflict, InvalidSpec, NotFound, WriteConflict
from jetcron.core.ids import job_key
from jetcron.core.models import JobRecord, JobSpec, JobStatus
from jetcron.core.timing import exclusions
from jetcron.core.timing.calendar_time import compile_calendar
from jetcron.core.timing.calendars import CalendarRecord, CalendarSpec, validate_calendar
from jetcron.core.timing.exclusions import JobCalendars
from jetcron.core.timing.ics import BUDGET_S, MAX_ICS_BYTES, IcsImport, parse_ics
from jetcron.core.validate import decode_as
from jetcron.wire import subjects as s
from jetcron.wire import verbs as v
from jetcron.wire.api import CalendarPreview, FireTime, Page
from jetcron_services.api.call import Call, job_named, visible
from jetcron_services.api.ports import CalendarsPorts
from jetcron_services.api.registry import Noun, verb
from jetcron_services.api.requests import body, integer, text

_SCAN_BATCH = 256
ICS_READERS = 2
"""ICS files one api process reads at once, each on a thread of its own (a read is CPU-bound: the event loop, which
answers every other verb, keeps its share); the rest wait their turn within their own budget."""
_ICS_GRACE_S = 2.0
"""How long past its budget a read is waited for: the read refuses itself at its budget, but only between two steps
of the walk, and a thread cannot be stopped from outside."""


async def job_calendars(store: Records[CalendarRecord], spec: JobSpec, *, strict: bool,
                        edited: CalendarSpec | None = None) -> JobCalendars | None:
    """The calendars `spec` names, from its own tenant's (`edited` stands in for the stored one of its name).
    `strict`: a name no calendar has is refused, naming the field and the name (at submit); otherwise it is
    resolved to None, which skips every occurrence, as the trigger would (a calendar deleted meanwhile)."""
    if not (spec.exclude_calendars or spec.only_calendars):
        return None

    async def one(field: str, i: int, name: str) -> tuple[str, Any]:
        if edited is not None and edited.name == name:
            return name, compile_calendar(edited)
        found = await store.maybe(job_key(spec.tenant, name))
        if found is None and strict:
            raise InvalidSpec(f"{field}[{i}]", name, "no such calendar (jetcron calendars list)")
        return name, compile_calendar(found[0].spec) if found is not None else None

    exclude = [await one("exclude_calendars", i, n) for i, n in enumerate(spec.exclude_calendars)]
    only = [await one("only_calendars", i, n) for i, n in enumerate(spec.only_calendars)]
    return JobCalendars(exclude=tuple(exclude), only=tuple(only))


def fire_times(rows: list[dict[str, str | None]]) -> list[FireTime]:
    return [FireTime(local=r["local"] or "", utc=r["utc"] or "", skipped=r["skipped"], until=r.get("until"))
            for r in rows]


class Calendars(Noun):
    noun = "calendars"

    def __init__(self, ctx: CalendarsPorts) -> None:
        self.ctx = ctx
        self._readers = asyncio.Semaphore(ICS_READERS)

    async def _imported(self, ics: str, name: str) -> IcsImport:
        """The file's dates and windows, read off the event loop within BUDGET_S (waiting for a reader included),
        or InvalidSpec naming `ics`, and the calendar, once it passes a bound or the budget
        (jetcron.core.timing.ics)."""
        started = time.monotonic()
        try:
            async with asyncio.timeout(BUDGET_S + _ICS_GRACE_S):
                await self._readers.acquire()
                reading = asyncio.ensure_future(asyncio.to_thread(
                    parse_ics, ics, now=self.ctx.clock.now(), elapsed=lambda: time.monotonic() - started))
                # The reader is the thread's until it ends, even when this call has given up on it.
                reading.add_done_callback(self._read)
                return await asyncio.shield(reading)
        except InvalidSpec as exc:
            raise InvalidSpec(exc.field, exc.value, f"calendar {name!r}: {exc.problem}") from None
        except TimeoutError:
            raise InvalidSpec("ics", f"{len(ics)} characters", f"calendar {name!r}: took more than {BUDGET_S:g} s "
                              "to read: split it, or keep fewer events") from None

    def _read(self, reading: asyncio.Future[IcsImport]) -> None:
        self._readers.release()
        if not reading.cancelled():
            reading.exception()  # retrieved: one given up on at the deadline is not logged as lost

    async def _spec(self, req: dict[str, Any], tenant: str | None) -> CalendarSpec:
        raw = req["calendar"]
        if not isinstance(raw, dict):
            raise InvalidSpec("calendar", raw, "must be a JSON object")
        if tenant is not None:  # the tenant is the caller's credential's, never the body's
            if raw.get("tenant", tenant) != tenant:
                raise InvalidSpec("calendar.tenant", raw["tenant"], f"is set by your credential (tenant {tenant!r}); "
                                  "leave it out")
            raw = {**raw, "tenant": tenant}
        spec = decode_as(raw, CalendarSpec, "calendar")
        ics = text(req, "ics", limit=MAX_ICS_BYTES)
        if ics is not None:
            found = await self._imported(ics, spec.name)
            spec = msgspec.structs.replace(spec, dates=sorted({*spec.dates, *found.dates}),
                                           windows=list(dict.fromkeys([*spec.windows, *found.windows])))
        validate_calendar(spec)
        return spec

    async def _stored(self, name: str | None, tenant: str | None) -> tuple[CalendarRecord, int]:
        """A calendar the caller may see, by the name it knows (the admin: by its key); another tenant's reads as
        missing."""
        try:
            key = job_named(name, tenant)
            record, revision = await self.ctx.calendars.get(key)
        except NotFound:
            raise NotFound("calendar", name or "") from None
        except InvalidSpec:
            raise InvalidSpec("name", name, "is not a valid calendar name") from None
        if not visible(record.spec.tenant, tenant):
            raise NotFound("calendar", name or "")
        return record, revision

    async def _users(self, spec: CalendarSpec) -> list[JobRecord]:
        """The live jobs of the calendar's tenant that name it: a scan of the tenant's jobs (a calendar change is
        rare; a job's record does not index its calendars)."""
        keys = sorted(await self.ctx.jobs.keys(s.jobs_of_tenant_filter(spec.tenant)))

        def names(record: JobRecord) -> bool:
            return (record.status is not JobStatus.DELETED and record.spec.tenant == spec.tenant
                    and spec.name in (*record.spec.exclude_calendars, *record.spec.only_calendars))

        found: list[JobRecord] = []
        for start in range(0, len(keys), _SCAN_BATCH):
            batch = keys[start:start + _SCAN_BATCH]
            items, _ = await self.ctx.jobs.page(batch, len(batch), names)
            found += items
        return found

    async def _still_runs(self, spec: CalendarSpec, now: datetime) -> None:
        """A changed calendar must leave every job that names it an occurrence within a year."""
        for job in await self._users(spec):
            calendars = await job_calendars(self.ctx.calendars, job.spec, strict=False, edited=spec)
            try:
                exclusions.check_year(job.spec, calendars, now=now, created_at=job.created_at)
            except InvalidSpec as exc:
                raise InvalidSpec("calendar", spec.name, f"job {job.spec.name!r} names it and would never run: "
                                  f"{exc.problem}") from None

    @verb
    async def create(self, call: Call) -> CalendarRecord:
        req = body(call.data, v.CalendarsCreate)
        spec, now = await self._spec(req, call.tenant), self.ctx.clock.now()
        record = CalendarRecord(spec=spec, created_at=now, updated_at=now)
        try:
            await self.ctx.calendars.create(spec.key, record)
        except WriteConflict:
            raise Conflict(f"calendar {spec.name!r} already exists (use update)") from None
        return record

    @verb
    async def update(self, call: Call) -> CalendarRecord:
        req = body(call.data, v.CalendarsUpdate)
        expected = integer(req, "expected_version", 0, 0, 2**53) or None
        spec = await self._spec(req, call.tenant)
        old, revision = await self._stored(spec.key if call.tenant is None else spec.name, call.tenant)
        if expected is not None and old.version != expected:
            raise Conflict(f"calendar {spec.name!r} is at version {old.version}, not {expected}: it changed since it "
                           "was read; read it again and retry")
        now = self.ctx.clock.now()
        await self._still_runs(spec, now)
        record = msgspec.structs.replace(old, spec=spec, version=old.version + 1, updated_at=now)
        await self.ctx.calendars.update(spec.key, record, revision)
        return record

    @verb
    async def get(self, call: Call) -> CalendarRecord:
        req = body(call.data, v.Named)
        return (await self._stored(text(req, "name"), call.tenant))[0]

    @verb
    async def list(self, call: Call) -> Page[CalendarRecord]:
        req = body(call.data, v.CalendarsList)
        limit = integer(req, "limit", 100, 1, 1000)
        after = text(req, "cursor") or ""
        keys = sorted(k for k in await self.ctx.calendars.keys(s.calendars_of_tenant_filter(call.tenant)) if k > after)
        items, cursor = await self.ctx.calendars.page(keys, limit, lambda r: visible(r.spec.tenant, call.tenant))
        return Page(items=items, next_cursor=cursor)

    @verb
    async def delete(self, call: Call) -> CalendarRecord:
        req = body(call.data, v.Named)
        name = text(req, "name")
        record, _ = await self._stored(name, call.tenant)
        users = await self._users(record.spec)
        if users:
            shown = ", ".join(sorted(j.spec.name for j in users)[:10])
            raise Conflict(f"calendar {record.spec.name!r} is named by {len(users)} job(s) ({shown}): take it out "
                           "of their exclude_calendars and only_calendars first")
        await self.ctx.calendars.delete(record.spec.key)
        return record

    @verb
    async def preview(self, call: Call) -> CalendarPreview:
        req = body(call.data, v.CalendarsPreview)
        spec = await self._spec(req, call.tenant)
        count = integer(req, "count", 10, 1, 100)
        name = text(req, "job")
        try:
            found = await self.ctx.jobs.get(job_named(name, call.tenant, "job"))
        except NotFound:
            raise NotFound("job", name or "") from None
        job = found[0]
        if job.status is JobStatus.DELETED or not visible(job.spec.tenant, call.tenant) \
                or job.spec.tenant != spec.tenant:
            raise NotFound("job", name or "")
        calendars = await job_calendars(self.ctx.calendars, job.spec, strict=False, edited=spec)
        rows = exclusions.preview(job.spec.schedule, self.ctx.clock.now(), count, created_at=job.created_at,
                                  calendars=calendars)
        return CalendarPreview(job=name or "", calendar=spec.name, next_fires=fire_times(rows))

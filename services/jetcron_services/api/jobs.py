"""Job verbs: create, update, get, list, pause, resume, delete, trigger, backfill."""

from __future__ import annotations

import secrets
from datetime import datetime, timedelta
from typing import Any

import msgspec

from jetcron.bus.cluster import pinned_shards
from jetcron.bus.idempotency import IdempotencyKeys, KeyRecord
from jetcron.core import ids
from jetcron.core.errors import Conflict, Contended, InvalidSpec, NotFound, WriteConflict
from jetcron.core.ids import JOB_NAME_RE, QUEUE_RE, body_hash, job_key, manual_run_id, run_id, shard_of
from jetcron.core.lifecycle import dag
from jetcron.core.lifecycle.retention import fires_by_mark, settled, validate_history
from jetcron.core.lifecycle.runs import WAITING_STATES, new_run
from jetcron.core.models import JobRecord, JobSpec, JobStatus, JoinPolicy, Run, RunState, Schedule, ShardLayout
from jetcron.core.timing import exclusions, triggers
from jetcron.core.timing.fire_marks import covers, mark_key
from jetcron.core.validate import decode_spec, validate_spec
from jetcron.telemetry.tracing import current_trace_id
from jetcron.wire import subjects as s
from jetcron.wire import verbs as v
from jetcron.wire.api import JobView, Page
from jetcron.wire.codec import encode, with_defaults
from jetcron_services.api import priorities
from jetcron_services.api.admission import Admission
from jetcron_services.api.calendars import fire_times, job_calendars
from jetcron_services.api.call import Call, job_named, visible
from jetcron_services.api.capacity import CapacityCheck
from jetcron_services.api.dependents import Dependents, describe, refusal
from jetcron_services.api.key_listing import KeyListing
from jetcron_services.api.registry import Noun, verb
from jetcron_services.api.requests import body, flag, instant, integer, text
from jetcron_services.runtime import Context


class Jobs(Noun):
    noun = "jobs"

    def __init__(self, ctx: Context, admission: Admission) -> None:
        self.ctx = ctx
        self.keys = IdempotencyKeys(ctx.publisher, ctx.streams)
        self.capacity = CapacityCheck(ctx)
        self.admission = admission
        self.listing = KeyListing(ctx.jobs)
        self.dependents = Dependents(ctx)

    async def _graph(self, spec: JobSpec) -> tuple[dict[str, tuple[str, list[str]]], dict[str, Schedule]]:
        """The stored jobs reachable upstream of `spec` (what a cycle check needs), read breadth-first, and their
        schedules (whether a same-occurrence join can ever be met)."""
        graph: dict[str, tuple[str, list[str]]] = {}
        schedules: dict[str, Schedule] = {}
        todo = list(spec.depends_on)
        while todo and len(graph) < 1000:
            name = todo.pop()
            if name in graph or name == spec.name or not JOB_NAME_RE.fullmatch(name):
                continue
            found = await self.ctx.jobs.maybe(job_key(spec.tenant, name))
            # Another tenant's job is left out, so it reads as unknown: a tenant learns nothing of it.
            if found is None or found[0].status is JobStatus.DELETED:
                continue
            if found[0].spec.tenant != spec.tenant:
                continue
            graph[name] = (found[0].spec.tenant, list(found[0].spec.depends_on))
            schedules[name] = found[0].spec.schedule
            todo.extend(found[0].spec.depends_on)
        return graph, schedules

    async def _validated(self, raw: Any, tenant: str | None) -> tuple[JobSpec, str]:
        if not isinstance(raw, dict):
            raise InvalidSpec("spec", raw, "must be a JSON object")
        if tenant is not None:
            # The tenant is the caller's credential's, never the body's.
            if raw.get("tenant", tenant) != tenant:
                raise InvalidSpec("spec.tenant", raw["tenant"], f"is set by your credential (tenant {tenant!r}); "
                                  "leave it out")
            raw = {**raw, "tenant": tenant}
        spec = decode_spec(raw)
        graph, schedules = await self._graph(spec)
        validate_spec(spec, now=self.ctx.clock.now(), jobs=graph,
                      min_interval_seconds=self.ctx.settings.min_interval,
                      allow_private_targets=self.ctx.settings.notify_allow_private,
                      email_enabled=self.ctx.settings.smtp_host is not None)
        validate_history(spec.history, self.ctx.history.cluster, "spec.history")
        await priorities.check_ceiling(self.ctx, spec.tenant, spec.priority, tenant)
        await self._root_allowed(spec)
        if spec.depends_on and dag.join_of(spec) is JoinPolicy.SAME_OCCURRENCE:
            edges = {name: ups for name, (_, ups) in graph.items()} | {spec.name: spec.depends_on}
            apart = dag.roots_apart(edges, spec.name, schedules)
            if apart is not None:
                raise InvalidSpec("join", JoinPolicy.SAME_OCCURRENCE.value,
                                  f"its upstreams come from {', '.join(apart)}, which fire on different schedules: "
                                  "no occurrence of one is an occurrence of another, so its runs would wait for "
                                  "ever; use join: latest")
        # Over every field: the hash a spec had when specs were stored whole, so a job stored then is still the same
        # body.
        return spec, body_hash(encode(with_defaults(spec)))

    async def _flows_meet(self, spec: JobSpec, field: str, *, itself: bool = False) -> None:
        """Refuse a change of `spec` (create, update, resume) after which a job joined on the same occurrence
        downstream of it (or `spec` itself, `itself`) could never be met: its upstreams would come from roots on
        different schedules (jetcron_services.api.dependents; `field`: what the change is refused on)."""
        found = await self.dependents.never_met(spec, itself=itself)
        if found is None:
            return
        dependent, roots, schedules = found
        if dependent == spec.name:
            field = "join"
        value: object = describe(spec.schedule) if field == "schedule" else \
            list(spec.depends_on) if field == "depends_on" else JoinPolicy.SAME_OCCURRENCE.value
        raise InvalidSpec(field, value, refusal(spec.name, dependent, roots, schedules))

    async def _root_allowed(self, spec: JobSpec) -> None:
        """A job may ask to run as root only where its tenant's policy allows it, the admin's job too: an agent
        would refuse it at every start anyway (and checks again then: the policy may change)."""
        if not spec.run_as_root:
            return
        found = await self.ctx.tenants.maybe(spec.tenant)
        if found is None or not found[0].allow_run_as_root:
            raise InvalidSpec("run_as_root", True, f"tenant {spec.tenant!r}'s policy does not allow jobs to run as "
                              f"root (the admin: jetcron tenants set {spec.tenant} --allow-run-as-root)")

    async def _calendars_ok(self, spec: JobSpec, created_at: datetime) -> None:
        """The calendars the job names exist (its own tenant's: another's reads as unknown), and leave it an
        occurrence to run within a year."""
        calendars = await job_calendars(self.ctx.calendars, spec, strict=True)
        exclusions.check_year(spec, calendars, now=self.ctx.clock.now(), created_at=created_at)

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
        spec, digest = await self._validated(req["spec"], call.tenant)
        await self._calendars_ok(spec, self.ctx.clock.now())
        # A name made again: jobs stored with it in their depends_on join this one.
        await self._flows_meet(spec, "schedule")
        await self.admission.admit(spec.tenant)
        key = text(req, "idempotency_key", limit=128)
        claim: int | None = None
        # Keys are per tenant: one tenant's key can neither collide with nor reveal another's.
        scope = f"create.{spec.tenant}.{key}"
        if key is not None:
            if not ids.IDEMPOTENCY_KEY_RE.fullmatch(key):
                raise InvalidSpec("idempotency_key", key, "must be 1-128 ASCII letters (A-Z, a-z), digits, '-' or '_'")
            existing = await self.keys.get(scope)
            if existing is not None and existing[0].state != "released":
                if existing[0].body_hash != digest:
                    raise Conflict(f"idempotency key {key!r} was already used with a different body")
                found = await self.ctx.jobs.maybe(spec.key)
                if found is not None:
                    return found[0]
                claim = existing[1]
            else:
                # A create refused for the name taken claims no key: a refused request stores nothing.
                taken = await self.ctx.jobs.maybe(spec.key)
                if taken is not None and taken[0].status is not JobStatus.DELETED and taken[0].body_hash != digest:
                    raise Conflict(f"job {spec.name!r} already exists (use update)")
                claim = await self.keys.claim(scope, KeyRecord(state="claimed", body_hash=digest),
                                              self.ctx.settings.request_key_seconds)
                if claim is None:
                    raise Contended(f"idempotency key {key!r} is being used by a concurrent request; retry")
        now = self.ctx.clock.now()
        # A one-off job's run continues this request's trace (the trigger fires it from a KV watch, no message).
        record = JobRecord(spec=spec, created_at=now, updated_at=now, body_hash=digest, trace_id=current_trace_id(),
                           warnings=await self.capacity.warnings(spec))
        if fires_by_mark(spec):
            # Its end from the start, so that firing it costs no second write (jetcron.core.timing.fire_marks).
            ends = now + timedelta(seconds=await self.ctx.history.keep_for(spec))
            record = msgspec.structs.replace(record, expires_at=ends, fired_by_mark=True)
        await self.dependents.add(spec)
        try:
            await self.ctx.jobs.create(spec.key, record)
        except WriteConflict:
            # Names are per tenant (the key holds the tenant): only the caller's own job can be in the way.
            old, revision = await self.ctx.jobs.get(spec.key)
            if old.status is not JobStatus.DELETED:
                if key is not None and old.body_hash == digest:
                    return old
                if claim is not None:  # made between the look above and this create: the key is let go again
                    await self.keys.forget(scope, claim)
                await self.dependents.drop(spec, kept=old.spec.depends_on)  # the edges written for it above
                raise Conflict(f"job {spec.name!r} already exists (use update)") from None
            record = msgspec.structs.replace(record, version=old.version + 1)
            await self.ctx.jobs.update(spec.key, record, revision)
        if key is not None and claim is not None:
            await self.keys.commit(scope, KeyRecord(state="done", body_hash=digest, result=spec.key),
                                   self.ctx.settings.request_key_seconds, claim)
        return record

    @verb
    async def update(self, call: Call) -> JobRecord:
        """Replace a job's spec; with `expected_version`, only if the job is still at that version (a client that
        read, changed and wrote it back must not undo a change made in between)."""
        req = body(call.data, v.JobsUpdate)
        expected = integer(req, "expected_version", 0, 0, 2**53) or None
        spec, digest = await self._validated(req["spec"], call.tenant)
        old, revision = await self._stored(spec.key, spec.name, call.tenant)
        if expected is not None and old.version != expected:
            raise Conflict(f"job {spec.name!r} is at version {old.version}, not {expected}: it changed since it was "
                           "read; read it again and retry")
        await self._calendars_ok(spec, old.created_at)
        await self._flows_meet(spec, "schedule" if spec.schedule != old.spec.schedule
                               else "depends_on" if spec.depends_on != old.spec.depends_on else "schedule")
        old = settled(old, await self._fired(old, revision))
        # A fired one-shot job keeps its end while its schedule stays; a new schedule fires again, so it stays.
        expires = old.expires_at if spec.schedule == old.spec.schedule else None
        record = msgspec.structs.replace(old, spec=spec, version=old.version + 1, updated_at=self.ctx.clock.now(),
                                         body_hash=digest, trace_id=current_trace_id(),
                                         warnings=await self.capacity.warnings(spec), expires_at=expires)
        await self.dependents.add(spec)
        try:
            await self.ctx.jobs.update(spec.key, record, revision)
        except WriteConflict:
            await self.dependents.drop(spec, kept=old.spec.depends_on)  # refused: the edges written for it above
            raise
        await self.dependents.drop(old.spec, kept=spec.depends_on)
        if flag(req, "apply_to_waiting"):
            await self._move_waiting(spec, call.tenant)
        return record

    async def _fired(self, record: JobRecord, revision: int) -> bool:
        """Whether a job made with its end (fired_by_mark), stored at `revision`, has fired: its shard's mark says
        so. False for any other job (its end says it), and while no mark covers it yet (it may not have fired)."""
        if not record.fired_by_mark:
            return False
        shards = await pinned_shards(await self.ctx.buckets.open(s.BUCKET_CLUSTER, ShardLayout))
        if shards is None:
            return False  # no trigger has ever started: nothing has fired
        mark = await self.ctx.cursors.maybe(mark_key(shard_of(record.spec.key, shards)))
        return mark is not None and covers(mark[0].fired_through, revision)

    async def _move_waiting(self, spec: JobSpec, caller: str | None) -> int:
        """The job's runs that have not started yet go to its new priority and queue; how many moved."""
        moved = 0
        for key in sorted(await self.ctx.runs.keys(s.runs_of_job_filter(spec.key))):
            found = await self.ctx.runs.maybe(key)
            if found is None or found[0].state not in WAITING_STATES or found[0].spec is None:
                continue
            if (found[0].spec.priority, found[0].spec.queue) == (spec.priority, spec.queue):
                continue
            try:
                await priorities.move(self.ctx, key, spec.priority, spec.queue, caller)
                moved += 1
            except (Conflict, NotFound):
                pass  # it started (or ended) meanwhile: it runs as it was placed
        return moved

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
        fired = await self._fired(record, revision)
        if status is JobStatus.ACTIVE and record.status is not JobStatus.ACTIVE:
            # Its flow may have changed while it was paused (records of an earlier release were never checked).
            await self._flows_meet(record.spec, "schedule", itself=True)

        def decide(current: JobRecord) -> JobRecord:
            if current.status is JobStatus.DELETED:  # deleted meanwhile: never brought back by a pause
                raise NotFound("job", asked)
            new = msgspec.structs.replace(settled(current, fired), status=status, version=current.version + 1,
                                          updated_at=now)
            # The pause window tells the trigger which unrecorded occurrences came due while paused (misfire).
            if status is JobStatus.PAUSED and current.status is JobStatus.ACTIVE:
                new = msgspec.structs.replace(new, paused_at=now)
            elif status is JobStatus.ACTIVE and current.status is JobStatus.PAUSED:
                new = msgspec.structs.replace(new, resumed_at=now)
            elif status is JobStatus.DELETED:
                # Kept as long as a finished run is, for `jobs list --include-deleted`; then the server removes it.
                keep = timedelta(seconds=self.ctx.history.cluster.keep_seconds)
                new = msgspec.structs.replace(new, expires_at=min(current.expires_at or now + keep, now + keep))
            return new

        changed = await self.ctx.jobs.change(record.spec.key, decide, copy=(record, revision), tries=5)
        assert changed is not None  # decide never gives up: it changes the record or raises
        if status is JobStatus.DELETED:
            await self.dependents.drop(record.spec)
        return changed[1]

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
        now = self.ctx.clock.now()
        # A retried request with the same key must hit the same run id: keep the time out of it then.
        stamp = now if "key" not in req else record.created_at
        run = new_run(record.spec, run_id=manual_run_id(record.spec.key, stamp, key), state=RunState.SCHEDULED,
                      scheduled_at=now, due_at=now, now=now, trace_id=current_trace_id(),
                      keep_seconds=await self.ctx.history.keep_for(record.spec))
        return await self._record(run)

    async def _record(self, run: Run) -> Run:
        """Record a run; a `scheduled` record is its hand-off to placement."""
        try:
            await self.ctx.runs.create(run.run_id, run)
        except WriteConflict:
            existing, _ = await self.ctx.runs.get(run.run_id)
            return existing
        return run

    @verb
    async def backfill(self, call: Call) -> Page[Run]:
        req = body(call.data, v.JobsBackfill)
        record, _ = await self._job(text(req, "name"), call.tenant)
        await self.admission.admit(record.spec.tenant)
        spec = record.spec
        start, end = instant(req, "from"), instant(req, "to")
        now = self.ctx.clock.now()
        limit = integer(req, "limit", 1000, 1, 10000)
        rate = integer(req, "rate", 100, 1, 1000)
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
        return Page(items=created)

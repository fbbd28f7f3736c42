"""The api's writes of a job's record, once its verb has checked the request: a create under an idempotency key, an
update, a status change; the flow edges (jetcron_services.api.dependents) written with each."""

from __future__ import annotations

from datetime import datetime, timedelta

import msgspec

from jetcron.bus.cluster import pinned_shards
from jetcron.bus.idempotency import IdempotencyKeys, KeyRecord
from jetcron.core import ids
from jetcron.core.errors import Conflict, Contended, InvalidSpec, NotFound, WriteConflict
from jetcron.core.ids import shard_of
from jetcron.core.lifecycle.retention import fires_by_mark, settled
from jetcron.core.lifecycle.runs import WAITING_STATES
from jetcron.core.models import JobRecord, JobSpec, JobStatus, ShardLayout
from jetcron.core.timing.fire_marks import covers, mark_key
from jetcron.telemetry.tracing import current_trace_id
from jetcron.wire import subjects as s
from jetcron_services.api import priorities
from jetcron_services.api.capacity import CapacityCheck
from jetcron_services.api.dependents import Dependents
from jetcron_services.api.ports import JobWritesPorts


class JobWrites:
    def __init__(self, ctx: JobWritesPorts, dependents: Dependents) -> None:
        self.ctx = ctx
        self.dependents = dependents
        self.keys = IdempotencyKeys(ctx.publisher, ctx.streams)
        self.capacity = CapacityCheck(ctx)

    async def create(self, spec: JobSpec, digest: str, key: str | None) -> JobRecord:
        """Store a new job (`digest`: its body hash); with an idempotency `key`, a retried request gets the job its
        first try made, and a different body under the same key is refused."""
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

    async def update(self, old: JobRecord, revision: int, spec: JobSpec, digest: str) -> JobRecord:
        """Replace the spec of `old`, stored at `revision`, with `spec` (`digest`: its body hash)."""
        old = settled(old, await self.fired(old, revision))
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
        return record

    async def set_status(self, record: JobRecord, revision: int, status: JobStatus, *, asked: str, now: datetime,
                         fired: bool) -> JobRecord:
        """Pause, resume or delete the job `record` (read at `revision`; `fired`: whether it had fired then), as of
        `now`; `asked`: the name the caller gave it."""

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

    async def fired(self, record: JobRecord, revision: int) -> bool:
        """Whether a job made with its end (fired_by_mark), stored at `revision`, has fired: its shard's mark says
        so. False for any other job (its end says it), and while no mark covers it yet (it may not have fired)."""
        if not record.fired_by_mark:
            return False
        shards = await pinned_shards(await self.ctx.buckets.open(s.BUCKET_CLUSTER, ShardLayout))
        if shards is None:
            return False  # no trigger has ever started: nothing has fired
        mark = await self.ctx.cursors.maybe(mark_key(shard_of(record.spec.key, shards)))
        return mark is not None and covers(mark[0].fired_through, revision)

    async def move_waiting(self, spec: JobSpec, caller: str | None) -> int:
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

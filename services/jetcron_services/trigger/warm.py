"""The trigger's warm state, fed by the KV watches on every replica: job records, cursors, the due index."""

from __future__ import annotations

from datetime import datetime
from typing import Any, TypeVar

import msgspec

from jetcron.core.lifecycle.dag import join_of
from jetcron.core.models import JobRecord, JobStatus, JoinPolicy, ScheduleKind
from jetcron.core.timing import triggers
from jetcron.core.timing.due_index import DueIndex
from jetcron.core.timing.fire_marks import FireMarks
from jetcron.wire.messages import Cursor

T = TypeVar("T")
_SHARED_SPEC_FIELDS = ("command", "schedule", "env", "resources", "retry", "misfire", "jitter", "depends_on",
                       "require", "tenant", "queue", "secrets", "notify", "image", "timeout_seconds",
                       "exclude_calendars", "only_calendars")


class _Interner:
    """One object per distinct value: a million jobs mostly share their policies, resources and schedules.

    Bounded: when full it starts afresh (objects already shared stay shared; nothing is wrong, some is spent).
    """

    def __init__(self, limit: int = 100_000) -> None:
        self.limit = limit
        self._seen: dict[tuple[type, object], Any] = {}

    def __call__(self, value: T) -> T:
        key: tuple[type, object] = (type(value), value)
        try:
            hash(key)  # frozen structs of scalars, strings
        except TypeError:
            key = (type(value), msgspec.json.encode(value))  # lists, dicts, structs holding them
        found = self._seen.get(key)
        if found is not None:
            return found  # type: ignore[no-any-return]
        if len(self._seen) >= self.limit:
            self._seen.clear()
        self._seen[key] = value
        return value


class Warm:
    """Every job of every shard, so that a won shard serves at once (a takeover, not a reload)."""

    def __init__(self, shards: int) -> None:
        self.index = DueIndex(shards)
        self.jobs: dict[str, JobRecord] = {}
        self.revisions: dict[str, int] = {}
        """Each held job's revision as its watch delivered it: a write of the job (a one-shot job's end) is
        checked against it instead of reading the job first."""
        self.cursors: dict[str, tuple[Cursor, int]] = {}
        self.marks = FireMarks()
        """The shards' fire marks, and the jobs made with their end that none covers yet."""
        self._intern = _Interner()

    def _compact(self, name: str, record: JobRecord) -> JobRecord:
        """The same record, its shareable parts shared with other jobs' (the trigger's memory per schedule)."""
        spec = record.spec
        shared = {f: self._intern(getattr(spec, f)) for f in _SHARED_SPEC_FIELDS}
        # The key's own string object stands for the name where they are equal (the default tenant's jobs).
        spec = msgspec.structs.replace(spec, name=name if name == spec.name else spec.name, **shared)
        updated = record.created_at if record.updated_at == record.created_at else record.updated_at
        return msgspec.structs.replace(record, spec=spec, updated_at=updated, warnings=self._intern(record.warnings))

    @staticmethod
    def fireable(record: JobRecord) -> bool:
        # A job joined on the same occurrence is started by its upstreams (DAG release), not by a schedule; one
        # joined on the latest fires on its own schedule, once its upstreams allow (firing.Firer._record). A
        # one-shot job that has an end has fired (firing.Firer._end): nothing is left to plan, nor held in memory;
        # one made with its end has fired once its shard's mark covers it (job_changed).
        spec = record.spec
        own_schedule = spec.schedule.kind is not ScheduleKind.NOW
        fires = not spec.depends_on or (join_of(spec) is JoinPolicy.LATEST and own_schedule)
        return record.status is JobStatus.ACTIVE and fires and (record.fired_by_mark or record.expires_at is None)

    def job_changed(self, name: str, record: JobRecord | None, now: datetime, revision: int = 0) -> None:
        """A job was created, changed or removed; a changed schedule applies from its next occurrence."""
        shard = self.index.shard(name)
        self.marks.delivered(revision)
        judged = record is not None and record.fired_by_mark and self.fireable(record)
        if record is not None and judged and not self.marks.fired(shard, revision):
            self.marks.opened(shard, name, revision)
        else:
            self.marks.closed(shard, name)
            if record is not None and record.fired_by_mark:
                record = None  # fired already: nothing to plan
        if record is None or not self.fireable(record):
            self.forget(name)
        else:
            self.jobs[name] = self._compact(name, record)
            self.revisions[name] = revision
            self.index.set(name, now)  # re-plan from the cursor at once

    def forget(self, name: str) -> None:
        self.jobs.pop(name, None)
        self.revisions.pop(name, None)
        self.index.remove(name)

    def fired(self, name: str, revision: int) -> None:
        """A job made with its end has fired at `revision` (its occurrence recorded): held no longer, unless a
        newer revision came meanwhile (that one is planned again)."""
        if self.revisions.get(name) == revision:
            self.marks.closed(self.index.shard(name), name, revision)
            self.forget(name)

    def mark_noted(self, shard: int, mark: int) -> list[str]:
        """A shard's mark read or written: the jobs it covers have fired and are let go (their names)."""
        covered = self.marks.noted(shard, mark)
        for name in covered:
            self.forget(name)
        return covered

    def standby_wake(self, name: str, horizon_seconds: float) -> datetime | None:
        """For a job of a shard we do not hold: when it next has work, from the cursor its holder wrote."""
        record = self.jobs.get(name)
        if record is None:
            return None
        cursor = self.cursors.get(name)
        return triggers.next_wake(record.spec, created_at=record.created_at, cursor=cursor[0].last if cursor else None,
                                  horizon_seconds=horizon_seconds)

    def cursor_changed(self, name: str, cursor: Cursor, revision: int) -> None:
        """A cursor written by any replica (ours included); only a newer revision replaces the one we hold."""
        known = self.cursors.get(name)
        if known is None or known[1] < revision:
            self.cursors[name] = (msgspec.structs.replace(cursor, job=name), revision)

"""A service Context on the bus's in-memory twins (jetcron.bus.memory): for tests of a verb's logic that need no
server. Anything that would reach NATS itself (its link) is absent, so a test that strays there fails; so are the
leases unless the test gives them a lease log (`twin_context(lease_log=...)`)."""

from __future__ import annotations

from typing import Any, cast

from jetcron.bus.lease import Leases
from jetcron.bus.memory import (
    BeforeWrite,
    MemoryBuckets,
    MemoryConsumers,
    MemoryPublisher,
    MemoryRecords,
    MemoryRpc,
    MemoryStreams,
)
from jetcron.bus.ports import LeaseLog
from jetcron.config import Settings
from jetcron.core.clock import Clock
from jetcron.core.lifecycle.retention import record_ttl
from jetcron.core.models import AgentInfo, JobRecord, Run, TenantPolicy
from jetcron.core.timing.calendars import CalendarRecord
from jetcron.ops.retention import History
from jetcron.wire import subjects as s
from jetcron.wire.messages import Cursor
from jetcron_services.runtime import Context, SystemClock


class _Absent:
    """Stands in for the NATS connection and the leases: any use says so."""

    def __init__(self, what: str) -> None:
        self._what = what

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"this test's Context has no {self._what} (it asked for .{name})")


def twin_context(name: str = "api", *, before_write: BeforeWrite | None = None,
                 settings: Settings | None = None, clock: Clock | None = None,
                 lease_log: LeaseLog | None = None) -> Context:
    """A Context whose run records carry their TTLs as kv.Store would write them (MemoryRecords.ttls).

    `clock`: what the services read the time from (a ManualClock the test moves), and what stamps the messages
    stored on the streams' twin; the wall clock otherwise.
    `lease_log`: the leases are the real ones (jetcron.bus.lease.Leases: revision-checked takes, renewals, releases and
    revokes) over this log, which the test keeps to read what was written or let a lease lapse (a MemoryLeaseLog,
    `expire`); it is `ctx.leases.log` too. Without one the Context has no leases."""
    settings = settings or Settings()
    clock = clock or SystemClock()
    tenants = MemoryRecords(s.BUCKET_TENANTS, TenantPolicy)
    return Context(
        name=name, settings=settings, link=cast(Any, _Absent("NATS connection")),
        jobs=MemoryRecords(s.BUCKET_JOBS, JobRecord, before_write=before_write),
        runs=MemoryRecords(s.BUCKET_RUNS, Run, before_write=before_write,
                           ttl_of=lambda run: record_ttl(run, clock.now(), settings.history)),
        cursors=MemoryRecords(s.BUCKET_CURSORS, Cursor), agents=MemoryRecords(s.BUCKET_AGENTS, AgentInfo),
        tenants=tenants, calendars=MemoryRecords(s.BUCKET_CALENDARS, CalendarRecord),
        leases=Leases(lease_log) if lease_log is not None else cast(Any, _Absent("leases")),
        history=History(tenants, settings.history), publisher=MemoryPublisher(),
        rpc=MemoryRpc(), buckets=MemoryBuckets(), consumers=MemoryConsumers(), streams=MemoryStreams(clock.now),
        clock=clock)

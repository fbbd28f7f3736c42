"""Typed methods for every API verb: `client.jobs.create(spec) -> JobRecord`, `client.runs.list(...) ->
Page[Run]`. Each builds its request from jetcron.wire.verbs and decodes the reply into that verb's reply type: the
verb `noun.action` is the method `action` of the group `noun` (tests/unit/test_sdk_verbs.py checks each against its
row: the verb it sends, its fields, its reply type)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from datetime import datetime
from typing import Any, Protocol, TypeVar

import msgspec

from jetcron.core.lifecycle.notify import Delivery
from jetcron.core.models import (
    AgentInfo,
    HistoryPolicy,
    JobRecord,
    JobSpec,
    Preemption,
    Priority,
    QueueQuota,
    Run,
    TenantPolicy,
)
from jetcron.core.timing.calendars import CalendarRecord, CalendarSpec
from jetcron.wire.api import CalendarPreview, ClusterStatus, JobView, Page
from jetcron.wire.messages import Submission
from jetcron.wire.verbs import FinishedRuns, Logs, SecretNames, SecretRef, TokenInfo, TokenList, TokenRevoked

T = TypeVar("T")


class Caller(Protocol):
    def call(self, verb: str, payload: dict[str, Any] | None = None) -> Awaitable[Any]: ...


class _Group:
    def __init__(self, caller: Caller) -> None:
        self._caller = caller

    async def _verb(self, verb: str, reply: type[T], **fields: Any) -> T:
        """Fields left None are not sent (the api's defaults apply); a JobSpec goes as its JSON form, a mapping as
        given (the api validates it and names the field that fails)."""
        payload = {k: _plain(v) for k, v in fields.items() if v is not None}
        result = await self._caller.call(verb, payload)
        return msgspec.convert(result, reply, strict=False)


def _plain(value: Any) -> Any:
    """As JSON sends it. A JobSpec left in the default tenant names none: the API files it under the caller's
    (a tenant's credential may not name another, and "default" is only the struct's default)."""
    plain = msgspec.to_builtins(value)
    if isinstance(value, JobSpec | CalendarSpec) and plain.get("tenant") == "default":
        del plain["tenant"]
    return plain


def _instant(value: datetime | str) -> str:
    return value.isoformat() if isinstance(value, datetime) else value


SpecLike = JobSpec | Mapping[str, Any]


class Jobs(_Group):
    async def create(self, spec: SpecLike, *, idempotency_key: str | None = None) -> JobRecord:
        return await self._verb("jobs.create", JobRecord, spec=spec, idempotency_key=idempotency_key)

    async def update(self, spec: SpecLike, *, expected_version: int | None = None,
                     apply_to_waiting: bool | None = None) -> JobRecord:
        """Replace the spec; `apply_to_waiting`: also move the job's runs that have not started to its new
        priority and queue."""
        return await self._verb("jobs.update", JobRecord, spec=spec, expected_version=expected_version,
                                apply_to_waiting=apply_to_waiting)

    async def get(self, name: str, *, count: int | None = None) -> JobView:
        return await self._verb("jobs.get", JobView, name=name, count=count)

    async def list(self, *, cursor: str | None = None, limit: int | None = None, queue: str | None = None,
                   include_deleted: bool | None = None) -> Page[JobRecord]:
        return await self._verb("jobs.list", Page[JobRecord], cursor=cursor, limit=limit, queue=queue,
                                include_deleted=include_deleted)

    async def pause(self, name: str) -> JobRecord:
        return await self._verb("jobs.pause", JobRecord, name=name)

    async def resume(self, name: str) -> JobRecord:
        return await self._verb("jobs.resume", JobRecord, name=name)

    async def delete(self, name: str) -> JobRecord:
        return await self._verb("jobs.delete", JobRecord, name=name)

    async def trigger(self, name: str, *, key: str | None = None) -> Run:
        return await self._verb("jobs.trigger", Run, name=name, key=key)

    async def backfill(self, name: str, start: datetime | str, end: datetime | str, *, limit: int | None = None,
                       rate: int | None = None) -> Page[Run]:
        return await self._verb("jobs.backfill", Page[Run], name=name, limit=limit, rate=rate,
                                **{"from": _instant(start), "to": _instant(end)})


class Runs(_Group):
    async def get(self, run_id: str) -> Run:
        return await self._verb("runs.get", Run, run_id=run_id)

    async def list(self, *, job: str | None = None, state: str | None = None, queue: str | None = None,
                   cursor: str | None = None, limit: int | None = None, newest: bool | None = None,
                   latest: bool | None = None) -> Page[Run]:
        return await self._verb("runs.list", Page[Run], job=job, state=state, queue=queue, cursor=cursor,
                                limit=limit, newest=newest, latest=latest)

    async def latest(self, job: str) -> Run | None:
        """The job's run whose record was written last (its most recent activity), or None before its first:
        one read on the server however long the job's history (runs.list with latest)."""
        page = await self.list(job=job, latest=True)
        return page.items[0] if page.items else None

    async def cancel(self, run_id: str, *, reason: str | None = None) -> Run:
        return await self._verb("runs.cancel", Run, run_id=run_id, reason=reason)

    async def set_priority(self, run_id: str, priority: Priority | str, *, queue: str | None = None) -> Run:
        """Move a run that has not started to another priority (and queue): it moves in the queue at once."""
        return await self._verb("runs.set_priority", Run, run_id=run_id, priority=str(priority), queue=queue)

    async def logs(self, run_id: str, *, limit_bytes: int | None = None, after: int | None = None) -> Logs:
        """The run's output so far; `after`: only what was stored after an earlier reply's `position`."""
        return await self._verb("runs.logs", Logs, run_id=run_id, limit_bytes=limit_bytes, after=after)

    async def finished(self, *, minutes: int | None = None) -> FinishedRuns:
        """Runs finished per minute over the last `minutes` (default 60), by outcome: the cluster's for the admin,
        the tenant's own for a tenant."""
        return await self._verb("runs.finished", FinishedRuns, minutes=minutes)


class Agents(_Group):
    async def list(self, *, cursor: str | None = None, limit: int | None = None) -> Page[AgentInfo]:
        return await self._verb("agents.list", Page[AgentInfo], cursor=cursor, limit=limit)


class Cluster(_Group):
    async def status(self) -> ClusterStatus:
        return await self._verb("cluster.status", ClusterStatus)


class Dlq(_Group):
    async def list(self, *, limit: int | None = None) -> Page[Run]:
        return await self._verb("dlq.list", Page[Run], limit=limit)

    async def replay(self, run_id: str, *, key: str | None = None) -> Run:
        return await self._verb("dlq.replay", Run, run_id=run_id, key=key)


class Tenants(_Group):
    async def set(self, tenant: str, *, weight: float | None = None, max_cpu: float | None = None,
                  max_memory_mb: int | None = None, max_gpus: int | None = None,
                  max_submits_per_second: float | None = None, max_pending_runs: int | None = None,
                  history: HistoryPolicy | None = None,
                  queues: dict[str, QueueQuota] | None = None,
                  max_priority: Priority | str | None = None,
                  preemption: Preemption | None = None, allow_run_as_root: bool = False) -> TenantPolicy:
        """Replace the tenant's policy: what is not given is unset. `queues`: quotas per named queue, e.g.
        {"batch": QueueQuota(max_cpu=8)}; `max_priority`: the highest priority its jobs and runs may ask for;
        `preemption`: its running runs may be preempted by runs of higher priority (docs/preemption.md);
        `allow_run_as_root`: its jobs may ask to run as root (on agents that allow it too)."""
        return await self._verb("tenants.set", TenantPolicy, tenant=tenant, weight=weight, max_cpu=max_cpu,
                                max_memory_mb=max_memory_mb, max_gpus=max_gpus,
                                max_submits_per_second=max_submits_per_second, max_pending_runs=max_pending_runs,
                                history=history, queues=queues,
                                max_priority=None if max_priority is None else str(max_priority),
                                preemption=preemption, allow_run_as_root=allow_run_as_root)

    async def list(self) -> Page[TenantPolicy]:
        return await self._verb("tenants.list", Page[TenantPolicy])


class Secrets(_Group):
    async def set(self, name: str, value: str, *, tenant: str | None = None) -> SecretRef:
        return await self._verb("secrets.set", SecretRef, name=name, value=value, tenant=tenant)

    async def list(self, *, tenant: str | None = None) -> SecretNames:
        return await self._verb("secrets.list", SecretNames, tenant=tenant)

    async def delete(self, name: str, *, tenant: str | None = None) -> SecretRef:
        return await self._verb("secrets.delete", SecretRef, name=name, tenant=tenant)


class Submissions(_Group):
    async def get(self, request_id: str, *, tenant: str | None = None) -> Submission:
        return await self._verb("submissions.get", Submission, request_id=request_id, tenant=tenant)


class Notifications(_Group):
    async def list(self, job: str, *, state: str | None = None, cursor: str | None = None,
                   limit: int | None = None) -> Page[Delivery]:
        return await self._verb("notifications.list", Page[Delivery], job=job, state=state, cursor=cursor,
                                limit=limit)

    async def redeliver(self, delivery_id: str) -> Delivery:
        return await self._verb("notifications.redeliver", Delivery, delivery_id=delivery_id)


class Tokens(_Group):
    async def create(self, *, tenant: str | None = None, admin: bool | None = None,
                     name: str | None = None) -> TokenInfo:
        return await self._verb("tokens.create", TokenInfo, tenant=tenant, admin=admin, name=name)

    async def list(self, *, tenant: str | None = None) -> TokenList:
        return await self._verb("tokens.list", TokenList, tenant=tenant)

    async def revoke(self, token_id: str) -> TokenRevoked:
        return await self._verb("tokens.revoke", TokenRevoked, token_id=token_id)


CalendarLike = CalendarSpec | Mapping[str, Any]


class Calendars(_Group):
    """Named calendars (docs/calendars.md). `ics`: an iCalendar file's text, whose events are added to the
    calendar's dates and windows."""

    async def create(self, calendar: CalendarLike, *, ics: str | None = None) -> CalendarRecord:
        return await self._verb("calendars.create", CalendarRecord, calendar=calendar, ics=ics)

    async def update(self, calendar: CalendarLike, *, ics: str | None = None,
                     expected_version: int | None = None) -> CalendarRecord:
        return await self._verb("calendars.update", CalendarRecord, calendar=calendar, ics=ics,
                                expected_version=expected_version)

    async def get(self, name: str) -> CalendarRecord:
        return await self._verb("calendars.get", CalendarRecord, name=name)

    async def list(self, *, cursor: str | None = None, limit: int | None = None) -> Page[CalendarRecord]:
        return await self._verb("calendars.list", Page[CalendarRecord], cursor=cursor, limit=limit)

    async def delete(self, name: str) -> CalendarRecord:
        return await self._verb("calendars.delete", CalendarRecord, name=name)

    async def preview(self, calendar: CalendarLike, job: str, *, count: int | None = None,
                      ics: str | None = None) -> CalendarPreview:
        """`job`'s next fire times as they would be with `calendar` in place of the stored one: nothing stored."""
        return await self._verb("calendars.preview", CalendarPreview, calendar=calendar, job=job, count=count,
                                ics=ics)


class Verbs:
    """The typed verbs, grouped as the API names them."""

    def __init__(self, caller: Caller) -> None:
        self.jobs = Jobs(caller)
        self.runs = Runs(caller)
        self.agents = Agents(caller)
        self.cluster = Cluster(caller)
        self.dlq = Dlq(caller)
        self.tenants = Tenants(caller)
        self.secrets = Secrets(caller)
        self.submissions = Submissions(caller)
        self.notifications = Notifications(caller)
        self.tokens = Tokens(caller)
        self.calendars = Calendars(caller)


class Blocking:
    """A verb group whose methods block on a private event loop (SyncClient's): `sync.jobs.create(spec)`."""

    def __init__(self, group: _Group, run: Callable[[Awaitable[Any]], Any]) -> None:
        self._group = group
        self._run = run

    def __getattr__(self, name: str) -> Callable[..., Any]:
        method = getattr(self._group, name)

        def blocking(*args: Any, **kwargs: Any) -> Any:
            return self._run(method(*args, **kwargs))

        return blocking

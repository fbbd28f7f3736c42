"""Every API verb: its request and its reply, the one home of their fields.

The api reads each request body by its struct's fields (services/jetcron_services/api/requests.body: unknown fields
refused, missing required ones named), the SDK decodes each reply into its type, and schemas/ (one JSON Schema per
request and reply, and the AsyncAPI document) is generated from this table. The api still checks each value
itself, so an error names the field the caller knows.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, NamedTuple

import msgspec

from jetcron.core.lifecycle.finished import FinishedMinute
from jetcron.core.lifecycle.notify import Delivery
from jetcron.core.models import AgentInfo, JobRecord, JobSpec, Priority, Run, TenantPolicy
from jetcron.core.timing.calendars import CalendarRecord, CalendarSpec
from jetcron.wire.api import CalendarPreview, ClusterStatus, JobView, Page
from jetcron.wire.messages import Submission


class Request(msgspec.Struct, kw_only=True, forbid_unknown_fields=True, omit_defaults=True):
    """Fields left at their defaults are not sent: the api applies the same defaults."""


class Named(Request, kw_only=True):
    name: str
    """The job's name (the admin: its key, `<tenant>.<name>`)."""


class RunRef(Request, kw_only=True):
    run_id: str


class JobsCreate(Request, kw_only=True):
    spec: JobSpec
    idempotency_key: str | None = None
    """A retried create with the same key and body answers the same job (a different body: conflict)."""


class JobsUpdate(Request, kw_only=True):
    spec: JobSpec
    expected_version: int | None = None
    """Only if the job is still at this version (conflict otherwise)."""
    apply_to_waiting: bool = False
    """Also move the job's runs that have not started yet to the new spec's priority and queue (runs.set_priority
    for each): without it, a new priority applies from the next occurrence."""


class JobsGet(Named, kw_only=True):
    count: int = 5
    """Next fire times to show (0-100)."""


class JobsList(Request, kw_only=True):
    cursor: str | None = None
    limit: int = 100
    include_deleted: bool = False
    queue: str | None = None


class JobsTrigger(Named, kw_only=True):
    key: str | None = None
    """Names the manual run: a retry with the same key starts no second run."""


class JobsBackfill(Named, kw_only=True):
    start: str = msgspec.field(name="from")
    """The first instant, ISO 8601 with its offset."""
    end: str = msgspec.field(name="to")
    """Occurrences before this instant."""
    limit: int = 1000
    rate: int = 100


class RunsList(Request, kw_only=True):
    job: str | None = None
    state: str | None = None
    queue: str | None = None
    cursor: str | None = None
    limit: int = 100
    newest: bool = False
    """Newest first (by occurrence); the cursor then pages towards older runs. Not with a non-terminal state."""
    latest: bool = False
    """Only the job's run whose record was written last (its most recent activity), in one read however long its
    history: a page of at most one. Needs `job`; not with state, queue, cursor or newest."""


class RunsCancel(RunRef, kw_only=True):
    reason: str | None = None


class RunsSetPriority(RunRef, kw_only=True):
    priority: Priority
    queue: str | None = None
    """Its tenant's named queue to move it to as well; None: it stays where it is."""


class RunsLogs(RunRef, kw_only=True):
    limit_bytes: int = 1_048_576
    """The most output one reply holds (whole chunks, at least one when any is there)."""
    after: int = 0
    """Read only the output stored after this position: the `position` of an earlier reply (0: from the start)."""


class RunsFinished(Request, kw_only=True):
    minutes: int = 60
    """How many minutes back, the current one included (1-1440)."""


class DlqReplay(RunRef, kw_only=True):
    key: str | None = None
    """An idempotency key: a retried replay with the same key answers the same new run."""


class Empty(Request, kw_only=True):
    pass


class AgentsList(Request, kw_only=True):
    cursor: str | None = None
    """The last agent id of the previous page."""
    limit: int = 100


class DlqList(Request, kw_only=True):
    limit: int = 100


class ForTenant(Request, kw_only=True):
    tenant: str | None = None
    """The admin names the tenant; a tenant's credential names its own (or leaves it out)."""


class SecretsSet(ForTenant, kw_only=True):
    name: str
    value: str
    """Never answered back, logged or stored in clear."""


class SecretsDelete(ForTenant, kw_only=True):
    name: str


class SubmissionsGet(ForTenant, kw_only=True):
    request_id: str


class NotificationsList(Request, kw_only=True):
    job: str
    state: str | None = None
    """pending, delivered or parked."""
    cursor: str | None = None
    limit: int = 100


class NotificationsRedeliver(Request, kw_only=True):
    delivery_id: str


class TokensCreate(Request, kw_only=True):
    tenant: str | None = None
    admin: bool = False
    name: str = ""


class TokensRevoke(Request, kw_only=True):
    token_id: str


class CalendarsCreate(Request, kw_only=True):
    calendar: CalendarSpec
    ics: str | None = None
    """An iCalendar file's text: its events' days and times are added to the calendar's dates and windows
    (docs/calendars.md, "ICS")."""


class CalendarsUpdate(CalendarsCreate, kw_only=True):
    expected_version: int | None = None
    """Only if the calendar is still at this version (conflict otherwise)."""


class CalendarsList(Request, kw_only=True):
    cursor: str | None = None
    limit: int = 100


class CalendarsPreview(CalendarsCreate, kw_only=True):
    job: str
    """The job whose next fire times to show as they would be with this calendar (the stored one of the same name
    set aside); nothing is stored."""
    count: int = 10
    """Fire times to show (1-100), with the occurrences skipped between them."""


# Replies that are not records.
class Logs(msgspec.Struct, kw_only=True):
    run_id: str
    output: str
    complete: bool
    """The run's end marker was read: nothing more will come."""
    position: int = 0
    """Where this read stopped in the run's output: send it as `after` to read only what comes next (the request's
    `after` when nothing new was read)."""


class FinishedRuns(msgspec.Struct, kw_only=True):
    """The runs that finished in each minute of a span, by outcome: the whole cluster's for the admin, a tenant's
    own for a tenant."""

    since: datetime
    """The first minute of the span (UTC)."""
    items: list[FinishedMinute]
    """The minutes of the span in which runs finished, oldest first (a minute without one is left out)."""


class SecretRef(msgspec.Struct, kw_only=True, omit_defaults=True):
    tenant: str
    name: str
    updated_at: datetime | None = None
    deleted: bool = False


class SecretNames(msgspec.Struct, kw_only=True):
    tenant: str
    items: list[str]


class TokenInfo(msgspec.Struct, kw_only=True, omit_defaults=True):
    token_id: str
    tenant: str | None
    admin: bool
    name: str
    created_at: datetime
    token: str | None = None
    """Only in the answer to tokens.create: shown once, never stored."""


class TokenList(msgspec.Struct, kw_only=True):
    items: list[TokenInfo]


class TokenRevoked(msgspec.Struct, kw_only=True):
    token_id: str
    revoked: bool


class Verb(NamedTuple):
    request: type[msgspec.Struct]
    """A Request, or a record taken whole (tenants.set takes a TenantPolicy)."""
    reply: Any
    summary: str
    admin: bool = False
    """Answered for the admin only (a tenant's credential gets forbidden)."""


VERBS: dict[str, Verb] = {
    "jobs.create": Verb(JobsCreate, JobRecord, "Validate and store a job"),
    "jobs.update": Verb(JobsUpdate, JobRecord, "Replace a job's spec, from its next occurrence"),
    "jobs.get": Verb(JobsGet, JobView, "A job and its next fire times"),
    "jobs.list": Verb(JobsList, Page[JobRecord], "Jobs, by key, with a cursor"),
    "jobs.pause": Verb(Named, JobRecord, "Stop firing a job's occurrences"),
    "jobs.resume": Verb(Named, JobRecord, "Fire a paused job's occurrences again (its misfire policy decides "
                                          "what came due meanwhile)"),
    "jobs.delete": Verb(Named, JobRecord, "Delete a job (its runs are kept)"),
    "jobs.trigger": Verb(JobsTrigger, Run, "Run a job now"),
    "jobs.backfill": Verb(JobsBackfill, Page[Run], "Run a job's occurrences in [from, to)"),
    "runs.get": Verb(RunRef, Run, "A run, with every attempt"),
    "runs.list": Verb(RunsList, Page[Run], "Runs, by id, with a cursor; or a job's latest run"),
    "runs.cancel": Verb(RunsCancel, Run, "Cancel a run"),
    "runs.set_priority": Verb(RunsSetPriority, Run, "Move a run that has not started to another priority (and "
                                                    "queue): it moves in the placement queue at once"),
    "runs.logs": Verb(RunsLogs, Logs, "A run's output so far"),
    "runs.finished": Verb(RunsFinished, FinishedRuns, "Runs finished per minute, by outcome"),
    "agents.list": Verb(AgentsList, Page[AgentInfo], "Live agents by id, a page at a time", admin=True),
    "cluster.status": Verb(Empty, ClusterStatus, "Leaders, trigger shard holders and the placement queue",
                           admin=True),
    "dlq.list": Verb(DlqList, Page[Run], "Dead-lettered runs"),
    "dlq.replay": Verb(DlqReplay, Run, "Run a dead or failed run again, as a new run"),
    "tenants.set": Verb(TenantPolicy, TenantPolicy, "Set a tenant's weight and quotas", admin=True),
    "tenants.list": Verb(Empty, Page[TenantPolicy], "Tenants' weights and quotas", admin=True),
    "secrets.set": Verb(SecretsSet, SecretRef, "Store a tenant's secret, encrypted"),
    "secrets.list": Verb(ForTenant, SecretNames, "The names of a tenant's secrets"),
    "secrets.delete": Verb(SecretsDelete, SecretRef, "Delete a tenant's secret"),
    "submissions.get": Verb(SubmissionsGet, Submission, "The outcome of an intake request"),
    "notifications.list": Verb(NotificationsList, Page[Delivery], "A job's notification deliveries, each with "
                                                                  "every try"),
    "notifications.redeliver": Verb(NotificationsRedeliver, Delivery, "Try a parked delivery again"),
    "tokens.create": Verb(TokensCreate, TokenInfo, "Issue a REST bearer token", admin=True),
    "tokens.list": Verb(ForTenant, TokenList, "Issued REST tokens (never the tokens)", admin=True),
    "tokens.revoke": Verb(TokensRevoke, TokenRevoked, "Refuse a REST token from now on", admin=True),
    "calendars.create": Verb(CalendarsCreate, CalendarRecord, "Store a named calendar (dates, rules, windows, "
                                                              "an ICS file's events)"),
    "calendars.update": Verb(CalendarsUpdate, CalendarRecord, "Replace a calendar, from the next occurrence of "
                                                              "every job that names it"),
    "calendars.get": Verb(Named, CalendarRecord, "A calendar"),
    "calendars.list": Verb(CalendarsList, Page[CalendarRecord], "Calendars, by key, with a cursor"),
    "calendars.delete": Verb(Named, CalendarRecord, "Delete a calendar no job names"),
    "calendars.preview": Verb(CalendarsPreview, CalendarPreview, "A job's next fire times under an edited "
                                                                 "calendar, before it is stored"),
}

"""The REST API's contract: one row per operation (its parameters with their real constraints, its body, every
status it answers with the RFC 9457 problem schema, the headers it reads and writes, the links that chain it to
the next call), from which the OpenAPI 3.1 document is made. Schemas are msgspec's own, so a reply is exactly
what its schema says; a test checks that every route the app serves has its row, and the reverse.

Rules JSON Schema cannot state are named in `SEMANTIC`: a request that passes the schema and breaks one of them is
answered 422 naming the field (docs/rest-api.md, "The contract")."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import msgspec

from jetcron.core.calendars import MAX_DATES, MAX_DESCRIPTION, MAX_WINDOWS, CalendarRule
from jetcron.core.ics import MAX_ICS_BYTES
from jetcron.core.ids import IDEMPOTENCY_KEY_RE, JOB_KEY_RE, JOB_NAME_RE, QUEUE_RE, RUN_ID_RE, TENANT_RE
from jetcron.core.models import AgentInfo, JobRecord, JobSpec, Run, TenantPolicy
from jetcron.core.notify import DELIVERY_ID_RE, Delivery
from jetcron.core.validate import MAX_MEMORY_MB
from jetcron.wire.api import CalendarPreview, ClusterStatus, FireTime, Page
from jetcron_services.gateway import status as words
from jetcron_services.gateway.admin import TenantPolicyBody
from jetcron_services.gateway.calendars import CalendarBody, CalendarPage, CalendarView, CreateCalendar
from jetcron_services.gateway.design import Created, CreateJob, JobPage, JobStatusView
from jetcron_services.gateway.gate import API, IF_MATCH_RE, PathRule
from jetcron_services.gateway.problems import PROBLEM_JSON, TITLES, Problem
from jetcron_services.gateway.runs import PriorityBody

JSON = "application/json"
MERGE_PATCH = "application/merge-patch+json"
TEXT = "text/plain"

NO_NUL = r"^[^\x00]*$"
JOB_ID = {"type": "string", "pattern": JOB_KEY_RE.pattern,
          "description": "The job's name (a tenant's token), or its key `tenant.name` (the admin's)."}
RUN_ID = {"type": "string", "pattern": RUN_ID_RE.pattern, "description": "A run's id: `<job key>.<stamp>`."}
CURSOR = {"type": "string", "maxLength": 256, "pattern": NO_NUL,
          "description": "The `next_cursor` of the page before."}


def _limit(default: int, hi: int = 1000, lo: int = 1) -> dict[str, Any]:
    return {"type": "integer", "minimum": lo, "maximum": hi, "default": default}


@dataclass(frozen=True)
class MergePatch:
    """A body that is a JSON merge patch (RFC 7396) of an `of` record: its schema is `of`'s with every property
    optional and nullable but those `of` must have (null removes one), its objects patched alike all the way down
    (`<Name>Patch`; what cannot change is readOnly there, by CONSTRAINTS)."""

    of: Any


@dataclass(frozen=True)
class Param:
    name: str
    where: str
    """path, query or header"""
    schema: dict[str, Any]
    description: str = ""
    required: bool = False


@dataclass(frozen=True)
class Op:
    method: str
    path: str
    operation_id: str
    summary: str
    reply: Any
    """The success body's type; TEXT for plain text."""
    status: int = 200
    description: str = ""
    params: tuple[Param, ...] = ()
    body: Any = None
    body_media: tuple[str, ...] = (JSON,)
    example: dict[str, Any] | None = None
    problems: tuple[int, ...] = ()
    """Statuses besides 401 and 503, which every route may answer."""
    reply_headers: tuple[str, ...] = ()
    links: dict[str, tuple[str, dict[str, str]]] = field(default_factory=dict)
    """name -> (operation id, its parameters from this reply: `$response.body#/job_id`)."""
    admin: bool = False
    verb: str | None = None
    """The API verb (jetcron.wire.verbs) this operation offers, whatever it reads besides (None: the gateway's own
    work). tests/unit/test_verb_doors.py checks that the route calls it, and that every verb has an operation or a
    reason for having none."""


HEADERS: dict[str, dict[str, Any]] = {
    "ETag": {"description": "The job's (or calendar's) version, quoted: send it back as `If-Match`.",
             "schema": {"type": "string", "pattern": r'^"[0-9]+"$'}, "required": True},
    "Location": {"description": "Where the new resource is read.", "schema": {"type": "string"}, "required": True},
    "Retry-After": {"description": "Seconds to wait before trying again.", "schema": {"type": "string"}},
    "WWW-Authenticate": {"description": "`Bearer realm=\"jetcron\"`.", "schema": {"type": "string"},
                         "required": True},
}
IDEMPOTENCY_KEY = Param("Idempotency-Key", "header", {"type": "string", "pattern": IDEMPOTENCY_KEY_RE.pattern},
                        "A retried request with the same key answers what the first did, and does nothing more.")
IF_MATCH = Param("If-Match", "header", {"type": "string", "pattern": IF_MATCH_RE.pattern},
                 "The version the change was made on (the ETag of `GET .../spec`): a job changed since is 409. "
                 "Without it: 428.", required=True)
_JOB = Param("job_id", "path", JOB_ID, required=True)
_RUN = Param("run_id", "path", RUN_ID, required=True)
_JOB_LINKS: dict[str, tuple[str, dict[str, str]]] = {
    name: (op, {"job_id": "$response.body#/job_id"})
    for name, op in (("GetJob", "getJob"), ("GetJobSpec", "getJobSpec"), ("TriggerJob", "triggerJob"),
                     ("PauseJob", "pauseJob"), ("CancelJob", "cancelJob"), ("DeleteJob", "deleteJob"))}
_RUN_LINKS: dict[str, tuple[str, dict[str, str]]] = {
    name: (op, {"run_id": "$response.body#/run_id"})
    for name, op in (("GetRun", "getRun"), ("CancelRun", "cancelRun"), ("RunLogs", "runLogs"))}
_RECORD_LINKS: dict[str, tuple[str, dict[str, str]]] = {
    "GetJob": ("getJob", {"job_id": "$response.body#/spec/name"})}

DESIGN_EXAMPLE = {"name": "nightly", "command": "./backup.sh", "resources": {"cpu": 1, "memory_gb": 2},
                  "priority": "high", "queue": "etl", "schedule": "0 */6 * * *",
                  "retry_policy": {"max_retries": 3, "backoff": "exponential"}, "timeout_seconds": 3600}

_CALENDAR_RULES = ("a zone that is not an IANA name", "a date outside the years 2000 to 2200, or given twice",
                   "a window that is not weekly, daily or START/END, or that ends where it starts",
                   "an ICS text that is not a valid iCalendar file, or yields too many dates or windows",
                   "a calendar with no dates, rules or windows", "weekdays and weekends together")
_CALENDAR = Param("name", "path", {"type": "string", "pattern": JOB_KEY_RE.pattern,
                                   "description": "The calendar's name (the admin's: its key, `tenant.name`)."},
                  required=True)
_CALENDAR_LINKS: dict[str, tuple[str, dict[str, str]]] = {
    name: (op, {"name": "$response.body#/calendar_id"})
    for name, op in (("GetCalendar", "getCalendar"), ("ReplaceCalendar", "replaceCalendar"),
                     ("DeleteCalendar", "deleteCalendar"))}
CALENDAR_EXAMPLE = {"name": "us-holidays", "tz": "America/New_York", "dates": ["2026-12-25", "2027-01-01"],
                    "windows": ["fri 16:00-mon 08:00"]}


def _status_description() -> str:
    """Which of jetcron's states each of the design's status words stands for (status.py), as a table."""
    rows = ["The design's word for the job's lifecycle; `state` gives jetcron's exact one.", "",
            "| status | state |", "|---|---|"]
    for word in words.STATUSES:
        if word == words.PAUSED:
            states = "`paused` (the job is paused, whatever its latest run did: `run_state` says)"
        else:
            states = ", ".join(f"`{state.value}`" for state, shown in words.WORD_OF.items() if shown == word)
            if word == words.NOT_RUN:
                states += ", or null (no run yet)"
        rows.append(f"| `{word}` | {states} |")
    return "\n".join(rows)


SEMANTIC: dict[str, tuple[str, ...]] = {
    "createJob": ("a cron expression's fields and ranges, and a schedule that never fires (Feb 30)",
                  "an instant far in the past or the future; an interval shorter than the cluster's",
                  "a zone that is not an IANA name", "a gang (resources.hosts > 1) without GPUs",
                  "depends_on naming a job that does not exist, or a cycle",
                  "a join, a wait timeout or a schedule that cannot work together (docs/architecture.md, Flows)",
                  "a retention outside the cluster's floor and ceiling", "environment names that change how the "
                  "child runs", "a webhook to a private address, an email without SMTP",
                  "a calendar it names that does not exist, or calendars that skip every occurrence for a year"),
    "patchJob": ("the merged spec is checked as a created job's is",),
    "backfill": ("instants that are not ISO 8601 with their offset, or out of order",),
    "preview": ("a cron expression's fields and ranges, and one that fires more than once a second or never",
                "a zone that is not an IANA name", "an instant far in the past or the future",
                "calendars it names that do not exist"),
    "setTenant": ("numbers above the cluster's bounds",),
    "createCalendar": _CALENDAR_RULES,
    "replaceCalendar": ("the calendar is checked as a created one is",
                        "a job that names it must keep an occurrence to run within a year"),
    "previewCalendar": ("the calendar is checked as a created one is",),
}
"""Per operation: the rules the API checks that its schema cannot state (422 naming the field)."""

_SPEC_RULES = ("command", "schedule", "resources", "retry", "depends_on", "join", "wait_timeout_seconds", "history",
               "env", "secrets", "notify", "exclude_calendars", "only_calendars", "image", "require",
               "start_deadline_seconds", "finish_deadline_seconds", "misfire", "jitter", "overlap", "run_as_root")
_CALENDAR_RULE_FIELDS = ("tz", "dates", "rules", "windows", "ics", "calendar")
SEMANTIC_FIELDS: dict[str, tuple[str, ...]] = {
    "createJob": (*_SPEC_RULES, "timezone", "retry_policy"),
    "patchJob": _SPEC_RULES,
    "backfill": ("from", "to"),
    "preview": ("cron", "timezone", "from", "exclude", "only"),
    "setTenant": ("weight", "max_cpu", "max_memory_mb", "max_gpus", "max_submits_per_second", "max_pending_runs",
                  "queues", "preemption"),
    "createCalendar": _CALENDAR_RULE_FIELDS,
    "replaceCalendar": _CALENDAR_RULE_FIELDS,
    "previewCalendar": (*_CALENDAR_RULE_FIELDS, "job"),
}
"""Per operation of SEMANTIC: the fields (and those under them) its rules are about. A 422 to a request the schema
allows names one of them, or the schema does not say what the server takes (the REST contract test checks it)."""


OPS: tuple[Op, ...] = (
    Op("post", f"{API}/jobs", "createJob", "Create a job", Created, status=201,
       description="The design's body, or any field of jetcron's job spec (docs/rest-api.md, \"The body\"); the "
                   "reply carries the submit-time warnings and `Location`.",
       params=(IDEMPOTENCY_KEY,), body=CreateJob, example=DESIGN_EXAMPLE, problems=(400, 403, 409, 413, 422, 429),
       reply_headers=("Location",), links=_JOB_LINKS, verb="jobs.create"),
    Op("get", f"{API}/jobs", "listJobs", "List jobs (filter by queue and status; cursor pagination)", JobPage,
       description="A filter applies before paging: a page is full unless the listing ended.",
       params=(Param("queue", "query", {"type": "string", "pattern": QUEUE_RE.pattern}),
               Param("status", "query", {"type": "string", "enum": list(words.JOB_WORDS)},
                     "The design's queued, running, completed, failed, paused, or a run state."),
               Param("cursor", "query", CURSOR), Param("limit", "query", _limit(50))),
       problems=(400, 422), verb="jobs.list"),
    Op("get", f"{API}/jobs/{{job_id}}", "getJob", "A job and its latest run", JobStatusView, params=(_JOB,),
       problems=(404, 422), verb="jobs.get"),
    Op("delete", f"{API}/jobs/{{job_id}}", "deleteJob", "Delete a job (its runs are kept)", JobRecord,
       params=(_JOB,), problems=(404, 409, 422), verb="jobs.delete"),
    Op("patch", f"{API}/jobs/{{job_id}}", "patchJob", "Change a job: a JSON merge patch (RFC 7396) of its spec",
       JobRecord, description="`If-Match` names the version read (the ETag of `GET .../spec`). The name and "
                              "tenant cannot change.",
       params=(_JOB, IF_MATCH, Param("apply_to_waiting", "query", {"type": "boolean", "default": False},
                                     "Also move the job's runs that have not started to its new priority and "
                                     "queue.")),
       body=MergePatch(JobSpec), body_media=(MERGE_PATCH, JSON),
       example={"timeout_seconds": 1800, "env": {"LEVEL": "debug"}}, problems=(400, 404, 409, 413, 422, 428),
       reply_headers=("ETag",), verb="jobs.update"),
    Op("get", f"{API}/jobs/{{job_id}}/spec", "getJobSpec", "A job's full spec and version (its ETag)", None,
       params=(_JOB, Param("count", "query", _limit(10, 100, 0), "How many next fire times.")),
       problems=(404, 422), reply_headers=("ETag",), verb="jobs.get"),
    Op("post", f"{API}/jobs/{{job_id}}/cancel", "cancelJob", "Cancel every unfinished run of the job", None,
       params=(_JOB,), problems=(404, 409, 422), verb="runs.cancel"),
    Op("post", f"{API}/jobs/{{job_id}}/pause", "pauseJob", "Pause a job (no new occurrences fire)", JobRecord,
       params=(_JOB,), problems=(404, 409, 422), links=_RECORD_LINKS, verb="jobs.pause"),
    Op("post", f"{API}/jobs/{{job_id}}/resume", "resumeJob", "Resume a paused job", JobRecord, params=(_JOB,),
       problems=(404, 409, 422), verb="jobs.resume"),
    Op("post", f"{API}/jobs/{{job_id}}/trigger", "triggerJob",
       "Run a job now (Idempotency-Key names the run: a retry starts no second one)", Run,
       params=(_JOB, IDEMPOTENCY_KEY), problems=(404, 409, 422, 429), links=_RUN_LINKS, verb="jobs.trigger"),
    Op("post", f"{API}/jobs/{{job_id}}/backfill", "backfill", "Run a job's occurrences in [from, to)", Page[Run],
       params=(_JOB,), body=None, example={"from": "2026-12-01T00:00:00Z", "to": "2026-12-02T00:00:00Z"},
       problems=(400, 404, 409, 413, 422, 429), verb="jobs.backfill"),
    Op("get", f"{API}/schedule/preview", "preview", "The next fire times of a schedule (the trigger's own code)",
       list[FireTime],
       params=(Param("from", "query", {"type": "string", "format": "date-time"}, required=True),
               Param("schedule", "query", {
                   "type": "object", "additionalProperties": False,
                   "properties": {"cron": {"type": "string", "minLength": 1, "maxLength": 256, "pattern": NO_NUL,
                                           "description": "A cron expression (in `timezone`)."},
                                  "every_seconds": {"type": "number", "minimum": 1, "maximum": 366 * 86400,
                                                    "description": "An interval in seconds, from `from`."}},
                   "oneOf": [{"required": ["cron"]}, {"required": ["every_seconds"]}]},
                     "Exactly one of `cron` and `every_seconds`, each its own query parameter (form style, "
                     "exploded): `?cron=0+3+*+*+*` or `?every_seconds=300`.", required=True),
               Param("timezone", "query", {"type": "string", "default": "UTC"}),
               Param("on_gap", "query", {"type": "string", "enum": ["shift", "skip"], "default": "shift"}),
               Param("on_fold", "query", {"type": "string", "enum": ["first", "last"], "default": "first"}),
               Param("count", "query", _limit(10)),
               Param("exclude", "query", {"type": "string", "maxLength": 1100, "pattern": NO_NUL},
                     "Calendars (comma-separated) whose occurrences are shown skipped: docs/calendars.md."),
               Param("only", "query", {"type": "string", "maxLength": 1100, "pattern": NO_NUL},
                     "Calendars (comma-separated) an occurrence must fall inside to fire.")),
       problems=(400, 422)),
    Op("get", f"{API}/runs", "listRuns", "List runs (by job, state, queue; cursor pagination)", Page[Run],
       params=(Param("job", "query", {"type": "string", "pattern": JOB_KEY_RE.pattern}),
               Param("state", "query", {"type": "string", "enum": list(words.RUN_WORDS)},
                     "The design's queued, running, completed or failed, or a run state."),
               Param("queue", "query", {"type": "string", "pattern": QUEUE_RE.pattern}),
               Param("cursor", "query", CURSOR), Param("limit", "query", _limit(50)),
               Param("newest", "query", {"type": "boolean", "default": False})),
       problems=(400, 422), verb="runs.list"),
    Op("get", f"{API}/runs/{{run_id}}", "getRun", "A run, with every attempt", Run, params=(_RUN,),
       problems=(404, 422), verb="runs.get"),
    Op("post", f"{API}/runs/{{run_id}}/cancel", "cancelRun", "Cancel a run", Run, params=(_RUN,),
       problems=(404, 409, 422), verb="runs.cancel"),
    Op("post", f"{API}/runs/{{run_id}}/priority", "setRunPriority",
       "Move a run that has not started to another priority (and queue): it moves in the queue at once", Run,
       description="A run that has started or ended is 409; a tenant's token may not go above its policy's "
                   "`max_priority` (403).",
       params=(_RUN,), body=PriorityBody, example={"priority": "high"}, problems=(400, 403, 404, 409, 413, 422),
       verb="runs.set_priority"),
    Op("get", f"{API}/runs/{{run_id}}/logs", "runLogs", "A run's output; ?follow=true streams it until the run ends",
       TEXT, description="A token may have `JETCRON_HTTP_LOG_FOLLOWERS` (8) streams open at once on one gateway; "
                         "one more is 429.",
       params=(_RUN, Param("follow", "query", {"type": "boolean", "default": False})), problems=(404, 422, 429),
       verb="runs.logs"),
    Op("get", f"{API}/dlq", "listDlq", "Dead-lettered runs (newest last)", Page[Run],
       params=(Param("limit", "query", _limit(100)),), problems=(400, 422), verb="dlq.list"),
    Op("post", f"{API}/dlq/{{run_id}}/replay", "replay", "Run a dead or failed run again, as a new run", Run,
       status=201, params=(_RUN, IDEMPOTENCY_KEY), problems=(404, 409, 422, 429), reply_headers=("Location",),
       links=_RUN_LINKS, verb="dlq.replay"),
    Op("get", f"{API}/jobs/{{job_id}}/notifications", "listNotifications",
       "A job's notification deliveries, each with every try", Page[Delivery],
       params=(_JOB, Param("state", "query", {"type": "string", "enum": ["pending", "delivered", "parked"]}),
               Param("cursor", "query", {**CURSOR, "maxLength": 400}), Param("limit", "query", _limit(100))),
       problems=(400, 404, 422), verb="notifications.list"),
    Op("post", f"{API}/notifications/{{delivery_id}}/redeliver", "redeliver",
       "Try a parked delivery again (a fresh set of tries; its log is kept)", Delivery, status=202,
       params=(Param("delivery_id", "path", {"type": "string", "pattern": DELIVERY_ID_RE.pattern}, required=True),),
       problems=(404, 409, 422), verb="notifications.redeliver"),
    Op("get", f"{API}/cluster", "clusterStatus", "Leaders, trigger shard holders and the placement queue (admin)",
       ClusterStatus, problems=(403,), admin=True, verb="cluster.status"),
    Op("get", f"{API}/agents", "listAgents", "Agents by id (admin; cursor pagination)", Page[AgentInfo],
       params=(Param("cursor", "query", CURSOR), Param("limit", "query", _limit(100))), problems=(403, 422),
       admin=True, verb="agents.list"),
    Op("get", f"{API}/tenants", "listTenants", "Tenants' weights and quotas (admin)", Page[TenantPolicy],
       problems=(403,), admin=True, verb="tenants.list"),
    Op("put", f"{API}/tenants/{{tenant}}", "setTenant", "Set a tenant's weight, quotas and retention (admin)",
       TenantPolicy, params=(Param("tenant", "path", {"type": "string", "pattern": TENANT_RE.pattern},
                                   required=True),),
       body=TenantPolicyBody, example={"weight": 2, "max_cpu": 64, "queues": {"batch": {"max_cpu": 8}}},
       problems=(400, 403, 413, 422), admin=True, verb="tenants.set"),
    Op("post", f"{API}/calendars", "createCalendar", "Create a named calendar", CalendarView, status=201,
       description="Dates, rules (`weekdays`, `weekends`), windows and an ICS file's events: jobs skip it "
                   "(`exclude_calendars`) or keep to it (`only_calendars`), docs/calendars.md.",
       body=CreateCalendar, example=CALENDAR_EXAMPLE, problems=(400, 403, 409, 413, 422),
       reply_headers=("Location", "ETag"),
       links=_CALENDAR_LINKS, verb="calendars.create"),
    Op("get", f"{API}/calendars", "listCalendars", "List calendars (cursor pagination)", CalendarPage,
       params=(Param("cursor", "query", CURSOR), Param("limit", "query", _limit(100))), problems=(400, 422),
       verb="calendars.list"),
    Op("get", f"{API}/calendars/{{name}}", "getCalendar", "A calendar (its version is the ETag)", CalendarView,
       params=(_CALENDAR,), problems=(404, 422), reply_headers=("ETag",), verb="calendars.get"),
    Op("put", f"{API}/calendars/{{name}}", "replaceCalendar",
       "Replace a calendar, from the next occurrence of every job that names it", CalendarView,
       description="`If-Match` (optional) names the version read: a calendar changed since is 409.",
       params=(_CALENDAR, Param("If-Match", "header", {"type": "string", "pattern": IF_MATCH_RE.pattern},
                                "The version the change was made on (the ETag of `GET .../calendars/{name}`).")),
       body=CalendarBody, example={"tz": "UTC", "rules": ["weekdays"]}, problems=(400, 403, 404, 409, 413, 422),
       reply_headers=("ETag",), verb="calendars.update"),
    Op("delete", f"{API}/calendars/{{name}}", "deleteCalendar", "Delete a calendar no job names (409 while one does)",
       CalendarView, params=(_CALENDAR,), problems=(404, 409, 422), verb="calendars.delete"),
    Op("post", f"{API}/calendars/{{name}}/preview", "previewCalendar",
       "A job's next fire times with the calendar as the body gives it: nothing is stored", CalendarPreview,
       params=(_CALENDAR, Param("job", "query", {"type": "string", "pattern": JOB_KEY_RE.pattern}, required=True),
               Param("count", "query", _limit(10, 100))),
       body=CalendarBody, example={"tz": "UTC", "dates": ["2026-12-25"]}, problems=(400, 403, 404, 413, 422),
       verb="calendars.preview"),
)
"""Every operation the REST API serves (its routes: jobs.py, runs.py, admin.py)."""

_CALENDAR_FIELDS: dict[str, dict[str, Any]] = {
    "tz": {"maxLength": 64}, "dates": {"maxItems": MAX_DATES, "items": {"type": "string", "format": "date"}},
    "rules": {"maxItems": 2, "items": {"type": "string", "enum": [r.value for r in CalendarRule]}},
    "windows": {"maxItems": MAX_WINDOWS, "items": {"type": "string", "maxLength": 100}},
    "description": {"maxLength": MAX_DESCRIPTION, "pattern": NO_NUL}, "ics": {"maxLength": MAX_ICS_BYTES},
    "tenant": {"pattern": TENANT_RE.pattern}}
_CALENDAR_NAMES = {"maxItems": 16, "items": {"type": "string", "pattern": JOB_NAME_RE.pattern}}

MONTH = 30 * 86400
BILLION = 10**9
CONSTRAINTS: dict[str, dict[str, dict[str, Any]]] = {
    "CreateJob": {
        "name": {"pattern": JOB_NAME_RE.pattern}, "queue": {"pattern": QUEUE_RE.pattern},
        "tenant": {"pattern": TENANT_RE.pattern},
        "timeout_seconds": {"exclusiveMinimum": 0, "maximum": MONTH},
        "wait_timeout_seconds": {"exclusiveMinimum": 0, "maximum": MONTH},
        "depends_on": {"maxItems": 32, "items": {"type": "string", "pattern": JOB_NAME_RE.pattern}},
        "exclude_calendars": _CALENDAR_NAMES, "only_calendars": _CALENDAR_NAMES,
    },
    "ResourcesBody": {"cpu": {"exclusiveMinimum": 0, "maximum": 1024},
                      "memory_gb": {"exclusiveMinimum": 0, "maximum": MAX_MEMORY_MB // 1024},
                      "memory_mb": {"minimum": 1, "maximum": MAX_MEMORY_MB},
                      "gpus": {"minimum": 0, "maximum": 64}, "hosts": {"minimum": 1, "maximum": 1024}},
    "RetryPolicyBody": {"max_retries": {"minimum": 0, "maximum": 99},
                        "initial_seconds": {"exclusiveMinimum": 0, "maximum": 86400}},
    "TenantPolicyBody": {"weight": {"exclusiveMinimum": 0, "maximum": 1000},
                         "max_cpu": {"minimum": 0, "maximum": BILLION},
                         "max_memory_mb": {"minimum": 0, "maximum": BILLION},
                         "max_gpus": {"minimum": 0, "maximum": BILLION},
                         "max_pending_runs": {"minimum": 0, "maximum": BILLION},
                         "max_submits_per_second": {"exclusiveMinimum": 0, "maximum": 1_000_000},
                         "queues": {"propertyNames": {"pattern": QUEUE_RE.pattern}}},
    "QueueQuota": {"max_cpu": {"minimum": 0, "maximum": BILLION}, "max_memory_mb": {"minimum": 0, "maximum": BILLION},
                   "max_gpus": {"minimum": 0, "maximum": BILLION}},
    "CalendarBody": {**_CALENDAR_FIELDS,
                     "tenant": {"pattern": TENANT_RE.pattern, "readOnly": True,
                                "description": "The calendar's own tenant: it cannot change (another is 422; "
                                               "another's, from a tenant's token, 403)."}},
    "CreateCalendar": {**_CALENDAR_FIELDS, "name": {"pattern": JOB_NAME_RE.pattern}},
    "PriorityBody": {"queue": {"pattern": QUEUE_RE.pattern}},
    "Backfill": {"from": {"format": "date-time"}, "to": {"format": "date-time"},
                 "limit": {"minimum": 1, "maximum": 10_000}, "rate": {"minimum": 1, "maximum": 1000}},
    "JobSpecPatch": {
        "name": {"pattern": JOB_NAME_RE.pattern, "readOnly": True,
                 "description": "The job's own name: it cannot change (another is 422)."},
        "tenant": {"pattern": TENANT_RE.pattern, "readOnly": True,
                   "description": "The job's own tenant: it cannot change (another is 422)."},
        "queue": {"pattern": QUEUE_RE.pattern},
        "timeout_seconds": {"exclusiveMinimum": 0, "maximum": MONTH},
        "wait_timeout_seconds": {"exclusiveMinimum": 0, "maximum": MONTH},
        "depends_on": {"maxItems": 32, "items": {"type": "string", "pattern": JOB_NAME_RE.pattern}},
        "exclude_calendars": _CALENDAR_NAMES, "only_calendars": _CALENDAR_NAMES,
    },
    "ResourcesPatch": {"cpu": {"exclusiveMinimum": 0, "maximum": 1024},
                       "memory_mb": {"minimum": 1, "maximum": MAX_MEMORY_MB},
                       "gpus": {"minimum": 0, "maximum": 64}, "hosts": {"minimum": 1, "maximum": 1024}},
    "JobStatusView": {"status": {"enum": list(words.STATUSES), "description": _status_description()},
                      "state": {"enum": list(words.STATES),
                                "description": "jetcron's exact state: `paused` for a paused job, else its latest "
                                               "run's state; null before its first run. `status` gives the "
                                               "design's word for it."}},
    "Created": {"status": {"enum": [words.NOT_RUN], "description": "A new job is `queued`: the design's word for "
                                                                   "a job that has not run yet."}},
}
"""What the API checks of a request's fields, and the words a reply's fields take, stated in the document (the
request structs decode without them, so a field that fails is answered by the API's own message, naming it)."""


_NOUNS = {"job_id": "job", "run_id": "run", "delivery_id": "delivery", "name": "calendar", "tenant": "tenant"}
"""What each path parameter names, for the problem that answers one outside its pattern."""


def path_rules() -> dict[str, tuple[PathRule, ...]]:
    """Per operation (`METHOD path`), its path parameters' patterns as the document states them (gate.check_path
    holds requests to them): a name outside one is 404 where the operation can answer 404, else 422."""
    rules: dict[str, tuple[PathRule, ...]] = {}
    for op in OPS:
        status = 404 if 404 in op.problems else 422
        rules[f"{op.method.upper()} {op.path}"] = tuple(
            PathRule(p.name, re.compile(p.schema["pattern"]), _NOUNS[p.name], status)
            for p in op.params if p.where == "path")
    return rules


_OF_PROPERTY = ("description", "readOnly")
"""Keywords that say what a property is, whichever branch its value takes: set on the property, not its types."""


def _constrain(components: dict[str, Any]) -> None:
    for name, fields in CONSTRAINTS.items():
        props = components[name]["properties"]
        for prop, extra in fields.items():
            schema = props[prop]
            extra = dict(extra)
            for keyword in _OF_PROPERTY:
                if keyword in extra:
                    schema[keyword] = extra.pop(keyword)
            branches = [b for b in schema.get("anyOf", [schema]) if b.get("type") != "null"]
            for branch in branches:
                branch.update(extra)


_REF = "#/components/schemas/"


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    branches = schema.get("anyOf", [schema])
    return {"anyOf": branches if any(b.get("type") == "null" for b in branches) else [*branches, {"type": "null"}]}


def _patch_of(schema: dict[str, Any], components: dict[str, Any]) -> dict[str, Any]:
    """What a merge patch may hold where the record holds `schema`: a record's object patched in turn (its
    `<Name>Patch`), a map's values nullable (null removes the key), anything else as it is (an array is replaced
    whole). Defaults are the record's, not the patch's: dropped."""
    if "$ref" in schema:
        name = schema["$ref"].removeprefix(_REF)
        target = components[name]
        if target.get("type") == "object" and "properties" in target:
            return {"$ref": _patched(components, name)}
        return {"$ref": schema["$ref"]}
    if "anyOf" in schema:
        return {"anyOf": [_patch_of(branch, components) for branch in schema["anyOf"]]}
    out = {k: v for k, v in schema.items() if k != "default"}
    if out.get("type") == "object" and isinstance(out.get("additionalProperties"), dict):
        out["additionalProperties"] = _nullable(out["additionalProperties"])
    return out


def _patched(components: dict[str, Any], name: str) -> str:
    """The component `<name>Patch` (made once): a merge patch of a `name`, every property optional and nullable
    but those a `name` must have (null would remove them), no other property."""
    patch = f"{name}Patch"
    if patch not in components:
        whole = components[name]
        components[patch] = {}  # taken before its properties are made: a record that holds itself ends here
        components[patch] = {
            "title": patch, "type": "object", "additionalProperties": False,
            "description": f"A JSON merge patch (RFC 7396) of a {name}: any of its properties, null removing one.",
            "properties": {prop: _patch_of(sub, components) if prop in whole.get("required", ())
                           else _nullable(_patch_of(sub, components)) for prop, sub in whole["properties"].items()}}
    return _REF + patch


def document() -> dict[str, Any]:
    """The OpenAPI 3.1 document."""
    from jetcron_services.gateway.jobs import Backfill, Cancelled, SpecView

    bodies = {"backfill": Backfill}
    replies = {"getJobSpec": SpecView, "cancelJob": Cancelled}
    types: list[Any] = [Problem]
    patches: list[MergePatch] = []
    for op in OPS:
        for kind in (bodies.get(op.operation_id, op.body), replies.get(op.operation_id, op.reply)):
            if isinstance(kind, MergePatch):
                patches.append(kind)
                kind = kind.of
            if kind is not None and kind is not TEXT and kind not in types:
                types.append(kind)
    refs, components = msgspec.json.schema_components(types, ref_template=_REF + "{name}")
    schema_of = dict(zip([_key(t) for t in types], refs, strict=True))
    for patch in patches:
        schema_of[_key(patch)] = {"$ref": _patched(components, schema_of[_key(patch.of)]["$ref"].removeprefix(_REF))}
    _constrain(components)
    paths: dict[str, dict[str, Any]] = {}
    for op in OPS:
        body = bodies.get(op.operation_id, op.body)
        reply = replies.get(op.operation_id, op.reply)
        paths.setdefault(op.path, {})[op.method] = _operation(op, body, reply, schema_of)
    return {
        "openapi": "3.1.0",
        "info": {"title": "jetcron", "version": "1",
                 "description": "The jetcron REST API (docs/rest-api.md). Every route takes "
                                "`Authorization: Bearer <token>`; errors are RFC 9457 problems."},
        "servers": [{"url": "/"}],
        "paths": paths,
        "components": {"schemas": components,
                       "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}},
        "security": [{"bearer": []}],
    }


def _key(kind: Any) -> str:
    return repr(kind)


def _operation(op: Op, body: Any, reply: Any, schema_of: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"operationId": op.operation_id, "summary": op.summary, "tags": [_tag(op)]}
    description = op.description
    if op.operation_id in SEMANTIC:
        description = (description + "\n\n" if description else "") + (
            "Checked beyond this schema (422, naming the field): " + "; ".join(SEMANTIC[op.operation_id]) + ".")
    if description:
        out["description"] = description
    if op.params:
        out["parameters"] = [_param(p) for p in op.params]
    if body is not None:
        content = {media: {"schema": schema_of[_key(body)]} for media in op.body_media}
        if op.example is not None:
            for media in op.body_media:
                content[media]["example"] = op.example
        out["requestBody"] = {"required": True, "content": content}
    responses: dict[str, Any] = {str(op.status): _success(op, reply, schema_of)}
    for status in sorted({*op.problems, 401, 503}):
        responses[str(status)] = _problem(status, schema_of)
    out["responses"] = responses
    return out


def _tag(op: Op) -> str:
    if op.admin:
        return "admin"
    if "/calendars" in op.path:
        return "calendars"
    return "runs" if "/runs" in op.path or "/dlq" in op.path else "jobs"


def _param(p: Param) -> dict[str, Any]:
    out: dict[str, Any] = {"name": p.name, "in": p.where, "required": p.required or p.where == "path",
                           "schema": p.schema}
    if p.where == "query" and p.schema.get("type") == "object":
        # Its properties are query parameters of their own (`?cron=...`), and the schema says which go together.
        out.update(style="form", explode=True)
    if p.description:
        out["description"] = p.description
    return out


def _success(op: Op, reply: Any, schema_of: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"description": TITLES.get(op.status, "OK") if op.status != 200 else "OK"}
    if reply is TEXT:
        out["content"] = {TEXT: {"schema": {"type": "string"}}}
    elif reply is not None:
        out["content"] = {JSON: {"schema": schema_of[_key(reply)]}}
    if op.reply_headers:
        out["headers"] = {name: HEADERS[name] for name in op.reply_headers}
    if op.links:
        out["links"] = {name: {"operationId": target, "parameters": params}
                        for name, (target, params) in op.links.items()}
    return out


_WHY = {400: "The request is malformed (a body that is not JSON, a query value of the wrong type, an unknown "
             "filter word).",
        401: "No bearer token, or one that is unknown or revoked.",
        403: "An admin route asked with a tenant's token, or a body whose `tenant` is another tenant's.",
        404: "No such job or run, or one of another tenant (they read alike).",
        409: "It exists already, it changed since it was read, or its state does not allow this.",
        413: "The body is larger than 1 MiB.",
        422: "A field fails validation; the problem names it and its value.",
        428: "`If-Match` is required.",
        429: "Over the tenant's submit rate or pending cap, or a token's open log streams; `Retry-After` says "
             "when to try again.",
        503: "Storage or the API service is unavailable or full (`storage_full`); retry after `Retry-After`."}


def _problem(status: int, schema_of: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"description": _WHY[status],
                           "content": {PROBLEM_JSON: {"schema": schema_of[_key(Problem)]}}}
    if status in (429, 503):
        out["headers"] = {"Retry-After": HEADERS["Retry-After"]}
    elif status == 401:
        out["headers"] = {"WWW-Authenticate": HEADERS["WWW-Authenticate"]}
    return out


START = "<!-- generated: python -m jetcron_services.gateway.contract docs/rest-api.md -->"
END = "<!-- end generated -->"


def reference() -> str:
    """docs/rest-api.md's operations table, made from the same rows as the document."""
    lines = [START, "", "| operation | id | answers | reads | writes |", "|---|---|---|---|---|"]
    for op in OPS:
        statuses = ", ".join(str(s) for s in sorted({op.status, *op.problems, 401, 503}))
        reads = ", ".join(f"`{p.name}`" for p in op.params if p.where == "header") or ""
        writes = ", ".join(f"`{h}`" for h in op.reply_headers)
        admin = " (admin)" if op.admin else ""
        lines.append(f"| `{op.method.upper()} {op.path}`{admin} | `{op.operation_id}` | {statuses} | {reads} | "
                     f"{writes} |")
    lines += ["", "Checked beyond the schemas, answered 422 naming the field:", ""]
    lines += [f"- `{op_id}`: {'; '.join(rules)}." for op_id, rules in SEMANTIC.items()]
    return "\n".join([*lines, "", END])


def write_reference(path: str) -> None:
    from pathlib import Path

    doc = Path(path)
    text = doc.read_text()
    start, end = text.index(START), text.index(END) + len(END)
    doc.write_text(text[:start] + reference() + text[end:])


if __name__ == "__main__":
    import sys

    write_reference(sys.argv[1])

"""Every operation the REST API serves, one row each, with the parameters, links and examples they share."""

from __future__ import annotations

from typing import Any

from jetcron.core.ids import JOB_KEY_RE, QUEUE_RE, TENANT_RE
from jetcron.core.lifecycle.notify import DELIVERY_ID_RE, Delivery
from jetcron.core.models import AgentInfo, JobRecord, JobSpec, Run, TenantPolicy
from jetcron.wire.api import CalendarPreview, ClusterStatus, FireTime, Page
from jetcron_services.gateway import status as words
from jetcron_services.gateway.admin import TenantPolicyBody
from jetcron_services.gateway.calendars import CalendarBody, CalendarPage, CalendarView, CreateCalendar
from jetcron_services.gateway.contract._rows import (
    CURSOR,
    IDEMPOTENCY_KEY,
    IF_MATCH,
    JOB_ID,
    JSON,
    MERGE_PATCH,
    NO_NUL,
    RUN_ID,
    TEXT,
    MergePatch,
    Op,
    Param,
)
from jetcron_services.gateway.design import Created, CreateJob, JobPage, JobStatusView
from jetcron_services.gateway.gate import API, IF_MATCH_RE
from jetcron_services.gateway.runs import PriorityBody


def _limit(default: int, hi: int = 1000, lo: int = 1) -> dict[str, Any]:
    return {"type": "integer", "minimum": lo, "maximum": hi, "default": default}


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

_CALENDAR = Param("name", "path", {"type": "string", "pattern": JOB_KEY_RE.pattern,
                                   "description": "The calendar's name (the admin's: its key, `tenant.name`)."},
                  required=True)
_CALENDAR_LINKS: dict[str, tuple[str, dict[str, str]]] = {
    name: (op, {"name": "$response.body#/calendar_id"})
    for name, op in (("GetCalendar", "getCalendar"), ("ReplaceCalendar", "replaceCalendar"),
                     ("DeleteCalendar", "deleteCalendar"))}
CALENDAR_EXAMPLE = {"name": "us-holidays", "tz": "America/New_York", "dates": ["2026-12-25", "2027-01-01"],
                    "windows": ["fri 16:00-mon 08:00"]}


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

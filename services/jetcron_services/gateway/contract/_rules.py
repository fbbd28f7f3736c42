"""What the API checks of a request beyond its schema, and the constraints the document states of each field."""

from __future__ import annotations

from typing import Any

from jetcron.core.ids import JOB_NAME_RE, QUEUE_RE, TENANT_RE
from jetcron.core.timing.calendars import MAX_DATES, MAX_DESCRIPTION, MAX_WINDOWS, CalendarRule
from jetcron.core.timing.ics import MAX_ICS_BYTES
from jetcron.core.validate import MAX_MEMORY_MB
from jetcron_services.gateway import status as words
from jetcron_services.gateway.contract._rows import NO_NUL

_CALENDAR_RULES = ("a zone that is not an IANA name", "a date outside the years 2000 to 2200, or given twice",
                   "a window that is not weekly, daily or START/END, or that ends where it starts",
                   "an ICS text that is not a valid iCalendar file, or yields too many dates or windows",
                   "a calendar with no dates, rules or windows", "weekdays and weekends together")


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

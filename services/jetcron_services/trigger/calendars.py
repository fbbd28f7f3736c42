"""The trigger's warm view of the named calendars (jc_calendars watch, every replica): each compiled once per
revision, resolved per job as its occurrences are planned. A calendar changed applies from the next occurrence
planned; those already recorded keep what was decided for them."""

from __future__ import annotations

import contextlib

from jetcron.core.errors import InvalidSpec
from jetcron.core.ids import job_key
from jetcron.core.models import JobSpec
from jetcron.core.timing.calendar_time import Compiled, compile_calendar
from jetcron.core.timing.calendars import CalendarRecord
from jetcron.core.timing.exclusions import JobCalendars


class CalendarView:
    def __init__(self) -> None:
        self.compiled: dict[str, Compiled] = {}
        """By key (`tenant.name`, the default tenant's bare): only calendars that compile (the api validated them;
        one that does not, written past it, reads as unknown and skips its jobs' occurrences, saying so)."""

    def changed(self, key: str, record: CalendarRecord | None) -> None:
        self.compiled.pop(key, None)
        if record is not None:
            with contextlib.suppress(InvalidSpec):
                self.compiled[key] = compile_calendar(record.spec)

    def for_job(self, spec: JobSpec) -> JobCalendars | None:
        """The calendars the job names, from its own tenant's; None when it names none."""
        if not (spec.exclude_calendars or spec.only_calendars):
            return None
        return JobCalendars(
            exclude=tuple((n, self.compiled.get(job_key(spec.tenant, n))) for n in spec.exclude_calendars),
            only=tuple((n, self.compiled.get(job_key(spec.tenant, n))) for n in spec.only_calendars))

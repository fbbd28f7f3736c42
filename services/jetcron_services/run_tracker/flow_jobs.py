"""The jobs the run tracker consults, from the jobs watch, and which of them depend on which."""

from __future__ import annotations

import asyncio

from jetcron.core.lifecycle.dag import join_of
from jetcron.core.models import JobRecord, JobSpec, JobStatus, JoinPolicy


def consulted(spec: JobSpec) -> bool:
    """Whether the tracker ever looks a job up: a downstream job (its upstreams' ends release it), or one with a
    deadline (Deadlines) or a wait timeout. It holds no other job: most are not (a day's `now` jobs, kept days)."""
    return bool(spec.depends_on) or spec.wait_timeout_seconds is not None \
        or spec.start_deadline_seconds is not None or spec.finish_deadline_seconds is not None


def latest_join(record: JobRecord | None) -> bool:
    """Whether the job waits for its upstreams joined on the latest (their marks say when it may run)."""
    return record is not None and bool(record.spec.depends_on) and join_of(record.spec) is JoinPolicy.LATEST


class FlowJobs:
    def __init__(self) -> None:
        self.jobs: dict[str, JobRecord] = {}
        """The active jobs the tracker consults (consulted()), by key."""
        self.downstream: dict[str, set[str]] = {}
        """Upstream job key -> its active dependents."""
        self.latest_downstream: dict[str, set[str]] = {}
        """Upstream job key -> its active dependents joined on the latest: the jobs whose successes are marked."""
        self.synced = asyncio.Event()
        """Set once the jobs watch has delivered every stored job."""

    def on_record(self, name: str, record: JobRecord | None) -> JobRecord | None:
        """A job's record changed (None: deleted): index it afresh; the record held until then, if any."""
        old = self.jobs.pop(name, None)
        if old is not None:
            for up in old.spec.upstream_keys():
                self.downstream.get(up, set()).discard(name)
                self.latest_downstream.get(up, set()).discard(name)
        if record is not None and record.status is JobStatus.ACTIVE and consulted(record.spec):
            self.jobs[name] = record
            for up in record.spec.upstream_keys():
                self.downstream.setdefault(up, set()).add(name)
                if latest_join(record):
                    self.latest_downstream.setdefault(up, set()).add(name)
        return old

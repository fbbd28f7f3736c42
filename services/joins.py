"""A `latest` join read from the run records (core/dag.not_since decides): when a dependent job last ran, and
when each of its upstreams last succeeded. Shared by the trigger (an occurrence of a job with its own schedule is
recorded waiting or scheduled) and the run tracker (an upstream's success releases a waiting run, or starts one).

Each answer lists the job's run keys (one request, filtered by the server: a job's runs only) and reads the newest
records until it knows; run ids order a job's runs by occurrence, so the newest come first."""

from __future__ import annotations

from datetime import datetime

from jetcron.bus.ports import Records
from jetcron.core.dag import not_since
from jetcron.core.errors import NotFound
from jetcron.core.models import JobSpec, Run, RunState
from jetcron.core.run_state import RunEvent
from jetcron.core.runs import Change, apply
from jetcron.ops.dispatch import dispatch
from jetcron.services.runtime import Context
from jetcron.wire import subjects as s

READ_AT_MOST = 64
"""Records read per question at most: a job whose last N runs all failed reads as never having succeeded."""
_UNRUN = frozenset({RunState.WAITING, RunState.SKIPPED, RunState.BLOCKED})
"""Runs that did not run: they do not count as the job's last run."""


async def _newest(runs: Records[Run], job: str) -> list[str]:
    return sorted(await runs.keys(s.runs_of_job_filter(job)), reverse=True)[:READ_AT_MOST]


async def last_success(runs: Records[Run], job: str) -> datetime | None:
    """When the job's newest succeeded run ended."""
    for key in await _newest(runs, job):
        found = await runs.maybe(key)
        if found is not None and found[0].state is RunState.SUCCEEDED:
            return found[0].finished_at or found[0].created_at
    return None


async def last_ran(runs: Records[Run], job: str, *, besides: str = "") -> datetime | None:
    """When the job's newest run that ran (or runs, or is about to) took its upstreams' successes: when it was
    released from waiting, or recorded ready; `besides`: a run not to count (the one being judged)."""
    for key in await _newest(runs, job):
        if key == besides:
            continue
        found = await runs.maybe(key)
        if found is not None and found[0].state not in _UNRUN:
            return found[0].released_at or found[0].created_at
    return None


async def waiting_run(runs: Records[Run], job: str) -> Run | None:
    """The job's newest run waiting on its upstreams (an overlap's buffered run waits on its job, not here)."""
    for key in await _newest(runs, job):
        found = await runs.maybe(key)
        if found is not None and found[0].state is RunState.WAITING and not found[0].after:
            return found[0]
    return None


async def readiness(runs: Records[Run], spec: JobSpec, *, besides: str = "") -> tuple[list[str], datetime | None]:
    """The upstream job keys (join: latest) without a success since the job last ran, and the newest of their
    latest successes: what a run they release is named after, so that two trackers releasing it at once name
    the same run (its create is the gate)."""
    since = await last_ran(runs, spec.key, besides=besides)
    ups = spec.upstream_keys()
    succeeded = {up: await last_success(runs, up) for up in ups}
    times = [at for at in succeeded.values() if at is not None]
    return not_since(ups, succeeded, since), max(times) if times else None


def upstream_wait(pending: list[str]) -> str:
    """A waiting run's reason."""
    return f"waiting on upstream jobs: {', '.join(pending)} (no success since this job last ran)"


async def release(ctx: Context, run_id: str, now: datetime, reason: str = "") -> Run | None:
    """Release a waiting run (a compare-and-set: released once, whoever else tries) and hand it to placement; the
    released run, or None when it was no longer waiting."""

    def decide(run: Run) -> Run | None:
        if run.state is not RunState.WAITING:
            return None
        return apply(run, Change(event=RunEvent.RELEASE, reason=reason), now)

    try:
        changed = await ctx.runs.change(run_id, decide)
    except NotFound:
        return None
    if changed is None:
        return None
    await dispatch(ctx.publisher, changed[1], place_by=ctx.settings.place_by)
    return changed[1]

"""Listings filtered by status words before paging: a page is full unless the listing ended (status.py says what
each word finds). A filtered jobs page reads on through the API's pages (API_PAGE jobs at most each) until it is
full or the caller's jobs end: each job is looked at once, so a page costs at most one read of each of the caller's
jobs and of their latest runs, however few match.

Both lean on what the API's cursors are: the key of the last record its page holds (a job's key, a run's id),
the listing going on with the keys after it (before it, for runs newest first). So a page can end at any record
the gateway chose, and listings of several states merge by id.
"""

from __future__ import annotations

import asyncio
import math

from jetcron.core.models import JobRecord, Run, RunState
from jetcron.sdk.client import Client
from jetcron.wire.api import Page
from jetcron_services.gateway.design import JobPage, JobStatusView, job_id, job_status
from jetcron_services.gateway.status import Wanted

API_PAGE = 1000
"""The most jobs or runs one API call lists."""


async def latest_run(c: Client, job: str) -> Run | None:
    """The run a job's status is taken from: the one written last (its most recent activity, docs/rest-api.md),
    one read on the server however long the job's history (runs.latest), once per job on a list page."""
    return await c.runs.latest(job)


async def jobs_page(c: Client, wanted: Wanted | None, *, tenant: str | None, base: str, queue: str | None,
                    cursor: str | None, limit: int) -> JobPage:
    """`limit` jobs of `queue` after `cursor` that `wanted` finds (all: None), each with its latest run; `tenant`
    and `base` as job_status takes them."""

    def view(job: JobRecord, run: Run | None) -> JobStatusView:
        return job_status(job, run, tenant, base=base)

    async def latest(job: JobRecord) -> Run | None:
        return await latest_run(c, job_id(job, tenant))

    if wanted is None:
        page = await c.jobs.list(queue=queue, cursor=cursor, limit=limit)
        runs = await asyncio.gather(*(latest(job) for job in page.items))
        return JobPage(items=[view(job, run) for job, run in zip(page.items, runs, strict=True)],
                       next_cursor=page.next_cursor)
    items: list[JobStatusView] = []
    looked = 0
    while True:
        missing = limit - len(items)
        # Ask for as many as the share found so far says will fill the page (all of them at first).
        ask = min(API_PAGE, max(missing, math.ceil(missing * (looked + 1) / (len(items) + 1))))
        page = await c.jobs.list(queue=queue, cursor=cursor, limit=ask)
        looked += len(page.items)
        # A job the record decides against needs no run read (a paused one under a run's word, and the reverse).
        runs = await asyncio.gather(*(latest(job) if wanted.by_record(job) is not False else _none()
                                      for job in page.items))
        for i, (job, run) in enumerate(zip(page.items, runs, strict=True)):
            if not wanted.finds(job, run):
                continue
            items.append(view(job, run))
            if len(items) == limit:
                more = i + 1 < len(page.items) or page.next_cursor is not None
                return JobPage(items=items, next_cursor=job.spec.key if more else None)
        if page.next_cursor is None:
            return JobPage(items=items, next_cursor=None)
        cursor = page.next_cursor


async def _none() -> None:
    return None


async def runs_page(c: Client, states: frozenset[RunState], *, job: str | None, queue: str | None,
                    cursor: str | None, limit: int, newest: bool) -> Page[Run]:
    """Runs in any of `states`: one listing per state, merged by run id, cut at `limit`."""
    if len(states) == 1:
        (state,) = states
        return await c.runs.list(job=job, state=state.value, queue=queue, cursor=cursor, limit=limit,
                                 newest=newest or None)
    pages = await asyncio.gather(*(c.runs.list(job=job, state=state.value, queue=queue, cursor=cursor, limit=limit,
                                               newest=newest or None) for state in sorted(states)))
    # The API lists newest first by a job's keys or among finished runs; a non-terminal state without a job comes
    # from the trackers' index, in id order (wire RunsList.newest).
    descending = newest and (job is not None or all(state.terminal for state in states))
    merged = sorted((run for page in pages for run in page.items), key=lambda run: run.run_id, reverse=descending)
    # A listing may end short with a cursor (without a job the API looks at so many jobs and records a page): the
    # merged page goes no further than the least far any listing got, so the next one skips no run and repeats none.
    reached = [page.next_cursor for page in pages if page.next_cursor]
    if len(merged) > limit:
        reached.append(merged[limit - 1].run_id)
    if not reached:
        return Page(items=merged, next_cursor=None)
    edge = max(reached) if descending else min(reached)
    items = [run for run in merged if (run.run_id >= edge if descending else run.run_id <= edge)][:limit]
    return Page(items=items, next_cursor=edge)

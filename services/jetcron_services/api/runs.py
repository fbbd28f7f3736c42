"""Run verbs: get, list, cancel, set a waiting run's priority, logs, finished per minute."""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Callable, Sequence

import msgspec

from jetcron.bus import rpc
from jetcron.bus.finished import read_minutes
from jetcron.bus.logs import read_chunks
from jetcron.bus.ports import Records
from jetcron.core.errors import InvalidSpec, NotFound, Unavailable
from jetcron.core.ids import QUEUE_RE, RUN_ID_RE
from jetcron.core.lifecycle.finished import first_minute
from jetcron.core.models import Run, RunState
from jetcron.ops.control import cancel_run
from jetcron.wire import subjects as s
from jetcron.wire import verbs as v
from jetcron.wire.api import Page, Reply
from jetcron.wire.codec import encode
from jetcron.wire.messages import ActiveRunsQuery
from jetcron_services.api import priorities
from jetcron_services.api.call import Call, job_named, visible
from jetcron_services.api.key_listing import KeyListing
from jetcron_services.api.ports import RunsPorts, VisibleRunPorts
from jetcron_services.api.registry import Noun, verb
from jetcron_services.api.requests import body, flag, integer, text

STATES = {st.value for st in RunState}
ACTIVE_TIMEOUT = 5.0
MAX_POSITION = 2**63 - 1
"""A stream sequence is an unsigned 64-bit count; JSON clients keep integers below 2**63 exactly."""


def run_id_of(value: str | None) -> str:
    if value is None or not RUN_ID_RE.fullmatch(value):
        raise InvalidSpec("run_id", value, "is not a run id (JOB.YYYYMMDDTHHMMSSmmmZ)")
    return value


async def visible_run(ctx: VisibleRunPorts, run_id: str, tenant: str | None) -> Run:
    """A run the caller may see: another tenant's reads exactly like a missing one."""
    run, _ = await ctx.runs.get(run_id)
    if not visible(run.tenant, tenant):
        raise NotFound("run", run_id)
    return run


SCAN_JOBS = 200
"""The most jobs whose run keys one page without a job lists."""
SCAN_RUNS = 2000
"""The most run records one page without a job reads (its state or queue filter passing over the others)."""
_FIRST, _LAST = "00000000T000000000Z", "99999999T999999999Z"
"""Stamps before and after every run's: a cursor at a job's edge is a run id the job never has."""


def job_order(job: str) -> str:
    """Where a job's runs stand among others' when listed by id: its key and the dot its run ids go on with."""
    return job + "."


def job_of_position(cursor: str) -> str:
    """The job a cursor (a run id) is among the runs of."""
    return cursor.rsplit(".", 1)[0]


def past_job(job: str, newest: bool) -> str:
    """A cursor past every run of `job`: after its last (before its first, newest first)."""
    return f"{job}.{_FIRST if newest else _LAST}"


async def runs_of(runs: Records[Run], job: str, after: str, newest: bool) -> list[str]:
    """The job's run keys past `after` (all: ""), by occurrence (newest first: before it). The server lists the
    job's key names (one request; no record is read): run ids start with the job's key."""
    everything = await runs.keys(s.runs_of_job_filter(job))
    if newest:
        return sorted((k for k in everything if not after or k < after), reverse=True)
    return sorted(k for k in everything if k > after)


async def across_jobs(runs: Records[Run], jobs: Sequence[str], after: str, newest: bool, limit: int,
                      keep: Callable[[Run], bool]) -> Page[Run]:
    """Runs of every job in `jobs` (those the caller may see, in job_order), job by job (newest: backwards), each
    job's by occurrence: a page lists the keys of a few jobs and reads only the records it looks at, however many
    runs the tenant has.

    A page looks at SCAN_JOBS jobs and SCAN_RUNS records at most: past either it ends short, with a cursor that
    goes on from where it stopped (a short page with a cursor means "keep going", never "the end")."""
    at = job_of_position(after)
    if newest:
        end = bisect_right(jobs, job_order(at), key=job_order) if after else len(jobs)
        window = list(jobs[max(0, end - SCAN_JOBS):end])[::-1]
        beyond = end > len(window)
    else:
        start = bisect_left(jobs, job_order(at), key=job_order) if after else 0
        window = list(jobs[start:start + SCAN_JOBS])
        beyond = start + len(window) < len(jobs)
    items: list[Run] = []
    read = 0
    for i, job in enumerate(window):
        if read >= SCAN_RUNS:
            return Page(items=items, next_cursor=past_job(window[i - 1], newest))
        keys = await runs_of(runs, job, after if job == at else "", newest)
        taken = keys[:SCAN_RUNS - read]
        found, stopped = await runs.page(taken, limit - len(items), keep)
        items.extend(found)
        more = len(taken) < len(keys) or i + 1 < len(window) or beyond
        if len(items) == limit:
            last = stopped or (taken[-1] if taken else None)
            return Page(items=items, next_cursor=last if (stopped or more) else None)
        read += len(taken)
        if len(taken) < len(keys):
            return Page(items=items, next_cursor=taken[-1])
    return Page(items=items, next_cursor=past_job(window[-1], newest) if beyond and window else None)


class Runs(Noun):
    noun = "runs"

    def __init__(self, ctx: RunsPorts) -> None:
        self.ctx = ctx
        self.job_keys = KeyListing(ctx.jobs, order=job_order)

    @verb
    async def get(self, call: Call) -> Run:
        req = body(call.data, v.RunRef)
        return await visible_run(self.ctx, run_id_of(text(req, "run_id")), call.tenant)

    @verb
    async def list(self, call: Call) -> Page[Run]:
        req = body(call.data, v.RunsList)
        job, queue = text(req, "job"), text(req, "queue")
        if queue is not None and not QUEUE_RE.fullmatch(queue):
            raise InvalidSpec("queue", queue, "must be 1-63 letters, digits, '-' or '_'")
        state = text(req, "state")
        if state is not None and state not in STATES:
            raise InvalidSpec("state", state, f"must be one of {', '.join(sorted(STATES))}")
        limit = integer(req, "limit", 100, 1, 1000)
        after = text(req, "cursor") or ""
        if job is not None:
            try:
                job = job_named(job, call.tenant, "job")
            except NotFound:
                return Page(items=[])  # another tenant's job: its runs read as none, as a missing job's
        newest = flag(req, "newest")
        if flag(req, "latest"):
            return await self._latest(job, call.tenant, {"state": state, "queue": queue, "cursor": after or None,
                                                         "newest": newest or None})
        if job is None and state is not None and not RunState(state).terminal:
            return await self._active(ActiveRunsQuery(state=state, tenant=call.tenant, queue=queue, cursor=after,
                                                      limit=limit))

        def keep(run: Run) -> bool:
            return ((state is None or run.state == state) and visible(run.tenant, call.tenant)
                    and (queue is None or (run.spec.queue if run.spec else "default") == queue))

        if job is None:
            # The jobs come from jc_jobs, listed again only when it changed (key_listing.py); a deleted job's
            # record is kept as long as its finished runs are, so its runs are listed too.
            return await across_jobs(self.ctx.runs, await self.job_keys.ordered(s.jobs_of_tenant_filter(call.tenant)),
                                     after, newest, limit, keep)
        # The server lists the job's key names (one request; no record is read): run ids start with the job's key.
        keys = await runs_of(self.ctx.runs, job, after, newest)
        items, cursor = await self.ctx.runs.page(keys, limit, keep)
        return Page(items=items, next_cursor=cursor)

    async def _latest(self, job: str | None, tenant: str | None, others: dict[str, object]) -> Page[Run]:
        """The job's run written last, in one read (Records.last) however many runs it has: the dashboard and the
        REST job views show it for every job on a page.

        When that last write was a delete (a run let go by retention), the newest run by occurrence stands in:
        the job's key names (one request) and a read of the newest ones until one is there."""
        if job is None:
            raise InvalidSpec("job", None, "is required with latest (the latest run is a job's)")
        for name, value in others.items():
            if value is not None:
                raise InvalidSpec(name, value, "cannot be combined with latest (the latest run is one read, "
                                               "whatever its state)")
        found = await self.ctx.runs.last(s.runs_of_job_filter(job))
        if found is not None:
            run: Run | None = found[0]
        else:
            keys = sorted(await self.ctx.runs.keys(s.runs_of_job_filter(job)), reverse=True)
            newest, _ = await self.ctx.runs.page(keys, 1, lambda _run: True)
            run = newest[0] if newest else None
        return Page(items=[run] if run is not None and visible(run.tenant, tenant) else [])

    async def _active(self, query: ActiveRunsQuery) -> Page[Run]:
        """The trackers' index of non-terminal runs (jetcron_services.run_tracker.listing). Without a tracker whose
        index is ready the answer is unavailable (retry), never a scan: among millions of records a scan would take
        minutes and load the store for everyone."""
        try:
            msg = await self.ctx.rpc.request(s.TRACKER_RUNS, encode(query), timeout=ACTIVE_TIMEOUT)
        except rpc.NoAnswer:
            raise Unavailable("no run tracker has its index of active runs ready (starting, or none running); "
                              "retry") from None
        reply = msgspec.json.decode(msg.data, type=Reply)
        if not reply.ok:
            raise Unavailable(f"the run trackers could not list active runs: {reply.error}")
        return msgspec.convert(reply.result, Page[Run], strict=False)

    @verb
    async def cancel(self, call: Call) -> Run:
        req = body(call.data, v.RunsCancel)
        run = await visible_run(self.ctx, run_id_of(text(req, "run_id")), call.tenant)
        return await cancel_run(self.ctx.runs, self.ctx.leases, self.ctx.rpc, run.run_id,
                                text(req, "reason") or "cancelled by user", self.ctx.clock.now(),
                                self.ctx.settings.run_lease_ttl)

    @verb
    async def set_priority(self, call: Call) -> Run:
        req = body(call.data, v.RunsSetPriority)
        run = await visible_run(self.ctx, run_id_of(text(req, "run_id")), call.tenant)
        priority, queue = priorities.parse(req.get("priority"), req.get("queue"))
        await priorities.check_ceiling(self.ctx, run.tenant, priority, call.tenant)
        return await priorities.move(self.ctx, run.run_id, priority, queue, call.tenant)

    @verb
    async def logs(self, call: Call) -> v.Logs:
        req = body(call.data, v.RunsLogs)
        run_id = (await visible_run(self.ctx, run_id_of(text(req, "run_id")), call.tenant)).run_id
        limit = integer(req, "limit_bytes", 1_048_576, 1, 8_388_608)
        after = integer(req, "after", 0, 0, MAX_POSITION)
        out: list[str] = []
        size = 0
        done = False
        position = after
        # From the stream by sequence: a follower that sends back its position has the server skip what it read.
        async for _stream, chunk, end, seq in read_chunks(self.ctx.streams, run_id, after=after):
            if end:
                done, position = True, seq
                break
            if out and size + len(chunk) > limit:
                break
            size += len(chunk)
            out.append(chunk.decode("utf-8", "replace"))
            position = seq
        return v.Logs(run_id=run_id, output="".join(out), complete=done, position=position)

    @verb
    async def finished(self, call: Call) -> v.FinishedRuns:
        """Runs finished per minute by outcome (jc_finished, written by the tracker leader): the cluster's for the
        admin, the caller's own tenant's for a tenant. Two requests, whatever the span."""
        req = body(call.data, v.RunsFinished)
        since = first_minute(self.ctx.clock.now(), integer(req, "minutes", 60, 1, 1440))
        return v.FinishedRuns(since=since, items=await read_minutes(self.ctx.streams, call.tenant, since))

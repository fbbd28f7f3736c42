"""Run verbs: get, list, cancel, set a waiting run's priority, logs, finished per minute."""

from __future__ import annotations

import msgspec

from jetcron.bus import rpc
from jetcron.bus.finished import read_minutes
from jetcron.bus.logs import read_chunks
from jetcron.core.errors import InvalidSpec, NotFound, Unavailable
from jetcron.core.finished import first_minute
from jetcron.core.ids import QUEUE_RE, RUN_ID_RE
from jetcron.core.models import Run, RunState
from jetcron.ops.control import cancel_run
from jetcron.services.api import priorities
from jetcron.services.api.call import Call, job_named, visible
from jetcron.services.api.registry import Noun, verb
from jetcron.services.api.requests import body, flag, integer, text
from jetcron.services.runtime import Context
from jetcron.wire import subjects as s
from jetcron.wire import verbs as v
from jetcron.wire.api import Page, Reply
from jetcron.wire.codec import encode
from jetcron.wire.messages import ActiveRunsQuery

STATES = {st.value for st in RunState}
ACTIVE_TIMEOUT = 5.0


def run_id_of(value: str | None) -> str:
    if value is None or not RUN_ID_RE.match(value):
        raise InvalidSpec("run_id", value, "is not a run id (JOB.YYYYMMDDTHHMMSSmmmZ)")
    return value


async def visible_run(ctx: Context, run_id: str, tenant: str | None) -> Run:
    """A run the caller may see: another tenant's reads exactly like a missing one."""
    run, _ = await ctx.runs.get(run_id)
    if not visible(run.tenant, tenant):
        raise NotFound("run", run_id)
    return run


class Runs(Noun):
    noun = "runs"

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    @verb
    async def get(self, call: Call) -> Run:
        req = body(call.data, v.RunRef)
        return await visible_run(self.ctx, run_id_of(text(req, "run_id")), call.tenant)

    @verb
    async def list(self, call: Call) -> Page[Run]:
        req = body(call.data, v.RunsList)
        job, queue = text(req, "job"), text(req, "queue")
        if queue is not None and not QUEUE_RE.match(queue):
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
        # The server lists the key names (one request; no record is read): by job, that job's keys alone, since
        # run ids start with the job's key; without one, the caller's tenant's keys alone.
        pattern = s.runs_of_job_filter(job) if job else s.runs_of_tenant_filter(call.tenant)
        everything = await self.ctx.runs.keys(pattern)
        if newest:
            keys = sorted((k for k in everything if not after or k < after), reverse=True)
        else:
            keys = sorted(k for k in everything if k > after)

        def keep(run: Run) -> bool:
            return ((state is None or run.state == state) and visible(run.tenant, call.tenant)
                    and (queue is None or (run.spec.queue if run.spec else "default") == queue))

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
        """The trackers' index of non-terminal runs (run_tracker/listing.py). Without a tracker whose index is
        ready the answer is unavailable (retry), never a scan: among millions of records a scan would take
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
        out: list[str] = []
        size = 0
        done = False
        async for _stream, chunk, end in read_chunks(self.ctx.streams, run_id):
            if end:
                done = True
                break
            size += len(chunk)
            if size > limit:
                break
            out.append(chunk.decode("utf-8", "replace"))
        return v.Logs(run_id=run_id, output="".join(out), complete=done)

    @verb
    async def finished(self, call: Call) -> v.FinishedRuns:
        """Runs finished per minute by outcome (jc_finished, written by the tracker leader): the cluster's for the
        admin, the caller's own tenant's for a tenant. Two requests, whatever the span."""
        req = body(call.data, v.RunsFinished)
        since = first_minute(self.ctx.clock.now(), integer(req, "minutes", 60, 1, 1440))
        return v.FinishedRuns(since=since, items=await read_minutes(self.ctx.streams, call.tenant, since))

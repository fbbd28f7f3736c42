"""Run verbs: get, list, cancel, logs, finished per minute; agents list; cluster status; dead-letter list and
replay; tenants."""

from __future__ import annotations

import math

import msgspec

from jetcron.bus import rpc
from jetcron.bus.control import cancel_run
from jetcron.bus.dispatch import dispatch
from jetcron.bus.dlq import dead_lettered
from jetcron.bus.finished import read_minutes
from jetcron.bus.logs import read_chunks
from jetcron.bus.overview import cluster_status
from jetcron.core.errors import Conflict, InvalidSpec, NotFound, Unavailable, WriteConflict
from jetcron.core.fairness import validate_queue_quotas
from jetcron.core.finished import first_minute
from jetcron.core.ids import (
    QUEUE_RE,
    RUN_ID_RE,
    TENANT_RE,
    job_of,
    keyed_replay_id,
    replay_run_id,
)
from jetcron.core.models import AgentInfo, QueueQuota, Run, RunState, TenantPolicy
from jetcron.core.preemption import validate_preemption
from jetcron.core.retention import validate_history
from jetcron.services.api import priorities
from jetcron.services.api.admission import Admission
from jetcron.services.api.call import Call, admin_only, job_named, visible
from jetcron.services.api.requests import body, flag, integer, text
from jetcron.services.runtime import Context
from jetcron.wire import subjects as s
from jetcron.wire import verbs as v
from jetcron.wire.api import ClusterStatus, Page, Reply
from jetcron.wire.codec import decode, encode
from jetcron.wire.messages import ActiveRunsQuery

STATES = {st.value for st in RunState}
ACTIVE_TIMEOUT = 5.0


class Runs:
    def __init__(self, ctx: Context, admission: Admission) -> None:
        self.ctx = ctx
        self.admission = admission

    def _run_id(self, value: str | None) -> str:
        if value is None or not RUN_ID_RE.match(value):
            raise InvalidSpec("run_id", value, "is not a run id (JOB.YYYYMMDDTHHMMSSmmmZ)")
        return value

    async def _run(self, run_id: str, tenant: str | None) -> Run:
        """A run the caller may see: another tenant's reads exactly like a missing one."""
        run, _ = await self.ctx.runs.get(run_id)
        if not visible(run.tenant, tenant):
            raise NotFound("run", run_id)
        return run

    async def get(self, call: Call) -> Run:
        req = body(call.data, v.RunRef)
        return await self._run(self._run_id(text(req, "run_id")), call.tenant)

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
            msg = await rpc.request(self.ctx.nc, s.TRACKER_RUNS, encode(query), timeout=ACTIVE_TIMEOUT)
        except rpc.NoAnswer:
            raise Unavailable("no run tracker has its index of active runs ready (starting, or none running); "
                              "retry") from None
        reply = msgspec.json.decode(msg.data, type=Reply)
        if not reply.ok:
            raise Unavailable(f"the run trackers could not list active runs: {reply.error}")
        return msgspec.convert(reply.result, Page[Run], strict=False)

    async def cancel(self, call: Call) -> Run:
        req = body(call.data, v.RunsCancel)
        run = await self._run(self._run_id(text(req, "run_id")), call.tenant)
        return await cancel_run(self.ctx.runs, self.ctx.leases, self.ctx.nc, run.run_id,
                                text(req, "reason") or "cancelled by user", self.ctx.clock.now(),
                                self.ctx.settings.run_lease_ttl)

    async def set_priority(self, call: Call) -> Run:
        req = body(call.data, v.RunsSetPriority)
        run = await self._run(self._run_id(text(req, "run_id")), call.tenant)
        priority, queue = priorities.parse(req.get("priority"), req.get("queue"))
        await priorities.check_ceiling(self.ctx, run.tenant, priority, call.tenant)
        return await priorities.move(self.ctx, run.run_id, priority, queue, call.tenant)

    async def logs(self, call: Call) -> v.Logs:
        req = body(call.data, v.RunsLogs)
        run_id = (await self._run(self._run_id(text(req, "run_id")), call.tenant)).run_id
        limit = integer(req, "limit_bytes", 1_048_576, 1, 8_388_608)
        out: list[str] = []
        size = 0
        done = False
        async for _stream, chunk, end in read_chunks(self.ctx.js, run_id):
            if end:
                done = True
                break
            size += len(chunk)
            if size > limit:
                break
            out.append(chunk.decode("utf-8", "replace"))
        return v.Logs(run_id=run_id, output="".join(out), complete=done)

    async def finished(self, call: Call) -> v.FinishedRuns:
        """Runs finished per minute by outcome (jc_finished, written by the tracker leader): the cluster's for the
        admin, the caller's own tenant's for a tenant. Two requests, whatever the span."""
        req = body(call.data, v.RunsFinished)
        since = first_minute(self.ctx.clock.now(), integer(req, "minutes", 60, 1, 1440))
        return v.FinishedRuns(since=since, items=await read_minutes(self.ctx.js, call.tenant, since))

    async def agents(self, call: Call) -> Page[AgentInfo]:
        admin_only(call, "agents.list")
        body(call.data, v.Empty)
        items: list[AgentInfo] = []
        for key in sorted(await self.ctx.agents.keys()):
            found = await self.ctx.agents.maybe(key)
            if found is not None:
                items.append(found[0])
        return Page(items=items)

    async def cluster_status(self, call: Call) -> ClusterStatus:
        admin_only(call, "cluster.status")
        body(call.data, v.Empty)
        return await cluster_status(self.ctx.js)

    async def dlq_list(self, call: Call) -> Page[Run]:
        req = body(call.data, v.DlqList)
        limit = integer(req, "limit", 100, 1, 1000)
        # From the dead-letter stream, newest last; not a scan of every run record.
        latest = {e.run_id: e for e in await dead_lettered(self.ctx.js, limit)}
        items: list[Run] = []
        for run_id, entry in latest.items():
            found = await self.ctx.runs.maybe(run_id)
            run = found[0] if found is not None else decode(entry.run, Run)
            if visible(run.tenant, call.tenant):
                items.append(run)
        return Page(items=items)

    async def dlq_replay(self, call: Call) -> Run:
        req = body(call.data, v.DlqReplay)
        run_id = self._run_id(text(req, "run_id"))
        run = await self._run(run_id, call.tenant)
        if run.state not in (RunState.DEAD, RunState.FAILED):
            raise Conflict(f"run {run_id} is {run.state}, only dead or failed runs can be replayed")
        await self.admission.admit(run.tenant)
        now = self.ctx.clock.now()
        key = text(req, "key", limit=128)
        # With a key, a retried request is the same replay (its id is the key's); without, each is a new one.
        ids = [keyed_replay_id(run_id, key)] if key is not None else [replay_run_id(run_id, n) for n in range(1, 100)]
        for n, replay_id in enumerate(ids, start=1):
            replay = msgspec.structs.replace(
                run, run_id=replay_id, state=RunState.SCHEDULED, attempt=1, due_at=now, created_at=now,
                agent=None, agents=[], token=0, assigned_at=None, started_at=None, finished_at=None, exit_code=None,
                outcome="", reason=f"replay {n if key is None else 'keyed'} of {run_id}", history=[],
            )
            try:
                await self.ctx.runs.create(replay.run_id, replay)
            except WriteConflict:
                if key is not None:
                    return (await self.ctx.runs.get(replay_id))[0]
                continue
            await dispatch(self.ctx.js, replay)
            return replay
        raise Conflict(f"run {run_id} was replayed too many times")

    async def tenants_set(self, call: Call) -> TenantPolicy:
        admin_only(call, "tenants.set")
        req = body(call.data, TenantPolicy)
        _check_queue_shapes(req.get("queues"))
        try:
            policy = msgspec.convert(req, TenantPolicy)
        except msgspec.ValidationError as exc:
            raise InvalidSpec("tenant", req, str(exc)) from None
        if not TENANT_RE.match(policy.tenant):
            raise InvalidSpec("tenant", policy.tenant, "must be 1-63 letters, digits, '-' or '_'")
        if not 0 < policy.weight <= 1000:
            raise InvalidSpec("weight", policy.weight, "must be > 0 and <= 1000")
        for name in ("max_cpu", "max_memory_mb", "max_gpus", "max_pending_runs"):
            value = getattr(policy, name)
            if value is not None and not 0 <= value <= 10**9:
                raise InvalidSpec(name, value, "must be >= 0")
        rate = policy.max_submits_per_second
        if rate is not None and not (math.isfinite(rate) and 0 < rate <= 10**6):
            raise InvalidSpec("max_submits_per_second", rate, "must be > 0 and <= 1000000")
        validate_queue_quotas(policy.queues)
        validate_preemption(policy)
        validate_history(policy.history, self.ctx.history.cluster)
        await self.ctx.tenants.put(policy.tenant, policy)
        return policy

    async def tenants_list(self, call: Call) -> Page[TenantPolicy]:
        admin_only(call, "tenants.list")
        body(call.data, v.Empty)
        items = [found[0] for key in sorted(await self.ctx.tenants.keys())
                 if (found := await self.ctx.tenants.maybe(key)) is not None]
        return Page(items=items)


def _check_queue_shapes(queues: object) -> None:
    """A queue quota that is not a QueueQuota is refused naming its queue and what it holds (the whole policy's
    conversion would name the tenant and a path without the queue's name)."""
    if not isinstance(queues, dict):
        return
    for name, quota in queues.items():
        try:
            msgspec.convert(quota, QueueQuota)
        except msgspec.ValidationError as exc:
            raise InvalidSpec(f"queues.{name}", quota, str(exc)) from None


__all__ = ["Runs", "job_of"]

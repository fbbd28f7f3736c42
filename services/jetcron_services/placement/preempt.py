"""Preemption on the placement leader (docs/preemption.md): a waiting run that has no place takes that of running runs
of strictly lower priority whose policy allows it.

The decision is jetcron.core.placing.preemption.choose over the books. The leader then tries it on the books in the same
pass: the victims' shares are released and the waiting run placed on what they leave (so that nothing else, the victims'
own next attempts included, can take it first), or everything is put back when it does not fit after all. Before
the waiting run's assignment is written, every victim is preempted as a cancel is fenced
(jetcron.ops.control.preempt_run: the record's CAS to a new attempt due after the grace, the agents told to stop it with
that grace, the lease revoked, the new attempt queued at its own priority) and the audit trail told who took its place.
"""

from __future__ import annotations

import asyncio
from datetime import datetime

from jetcron.core.errors import JetcronError
from jetcron.core.lifecycle.retention import stream_ttl
from jetcron.core.models import QueueQuota, RunState, TenantPolicy
from jetcron.core.placing.placement import Demand, Placement
from jetcron.core.placing.preemption import Amount, Guards, Holder, Plan, choose, guards_for, preemptible_anywhere
from jetcron.ops.control import preempt_run
from jetcron.telemetry import metrics
from jetcron.wire import subjects as s
from jetcron.wire.messages import RunPreempted
from jetcron_services.placement.ports import PreemptorPorts
from jetcron_services.placement.view import Held, View


class Preemptor:
    """Plans, tries and carries out preemptions for one placement leader's passes."""

    def __init__(self, ctx: PreemptorPorts, view: View) -> None:
        self.ctx = ctx
        self.view = view
        settings = ctx.settings
        self.defaults = Guards(max_preemptions=settings.preemption_max_per_run,
                               min_runtime_seconds=settings.preemption_min_runtime,
                               grace_seconds=settings.preemption_grace)
        self.plans: dict[str, tuple[Plan, list[Held]]] = {}
        """Per waiting run placed on a preemption's room: the plan and the victims' books, until carried out."""
        self._holders: list[Holder] | None = None
        self._failed: set[tuple[object, ...]] = set()
        self._possible: bool | None = None

    def begin_pass(self) -> None:
        """A pass starts: what the last one learnt about the books and the policies is stale."""
        self._holders = None
        self._failed.clear()
        self._possible = None

    def put_back(self) -> None:
        """Leadership ended before some plans were carried out: their victims count on their agents again (one whose
        preemption landed meanwhile is released again when its record comes: view.on_record)."""
        for _, saved in self.plans.values():
            for held in saved:
                self.view.adopt_again(held)
        self.plans.clear()

    def possible(self) -> bool:
        """Whether any tenant's policy lets its runs be preempted (asked once per pass)."""
        if self._possible is None:
            self._possible = any(preemptible_anywhere(p) for p in self.view.policies.values())
        return self._possible

    def reason(self, run_id: str) -> str:
        """The waiting run's reason while its victims make room ("" when it preempts nothing)."""
        planned = self.plans.get(run_id)
        return "" if planned is None else planned[0].reason

    def make_room(self, demand: Demand, now: datetime) -> Placement | None:
        """Place a demand that has no place on what preempting lower-priority runs would leave, or None (nothing
        changed). The plan waits in `plans` for `clear()`."""
        if not self.possible():
            return None  # the default: nobody's runs may be preempted
        key = (demand.resources, tuple(sorted(demand.require.items())), tuple(demand.needs), demand.priority,
               demand.tenant, demand.queue)
        if key in self._failed:
            return None
        lower = [h for h in self._candidates(now) if h.priority.rank > demand.priority.rank]
        plan = None if not lower else choose(demand.run_id, demand.priority, demand.resources,
                                             self.view.cluster.hosts_for(demand), lower, now, self._room(demand))
        if plan is None:
            self._failed.add(key)
            return None
        saved = [self.view.placed[v.run_id] for v in plan.victims]
        for v in plan.victims:
            self.view.release(v.run_id)
        self._holders = None  # the books changed
        placed = self.view.cluster.place_on(demand, plan.hosts, plan.leaf)
        if placed is None:  # the plan's view of the books and the books disagree: put it back
            for held in saved:
                self.view.adopt_again(held)
            self._failed.add(key)
            return None
        self.plans[demand.run_id] = (plan, saved)
        return placed

    def _candidates(self, now: datetime) -> list[Holder]:
        """Running runs whose policy lets them be preempted, with what they hold where (once per pass)."""
        if self._holders is not None:
            return self._holders
        view, found = self.view, []
        for run_id, held in view.placed.items():
            run = view.active.get(run_id)
            if held.revision is None or run is None or run.state is not RunState.RUNNING or run.attempt != held.attempt:
                continue
            demand = held.demand
            guards = guards_for(view.policies.get(demand.tenant), demand.queue, self.defaults)
            holds = view.cluster.holdings(run_id)
            if guards is None or not holds:
                continue
            found.append(Holder(run_id=run_id, attempt=run.attempt, tenant=demand.tenant, queue=demand.queue,
                                priority=demand.priority, started_at=run.started_at, preemptions=run.preemptions,
                                holds=holds, guards=guards))
        self._holders = found
        return found

    def _room(self, demand: Demand) -> Amount | None:
        """What the demand's tenant and queue may still take under their quotas (None: no quota)."""
        policy = self.view.policies.get(demand.tenant)
        if policy is None:
            return None
        queue = self.view.queue
        limits: list[tuple[TenantPolicy | QueueQuota, tuple[float, int, int]]] = [(policy, queue.usage(demand.tenant))]
        own = policy.queues.get(demand.queue)
        if own is not None:
            limits.append((own, queue.queue_usage(demand.tenant, demand.queue)))
        big = 1 << 62
        room = Amount(big, big, big)
        for quota, (cpu, mem, gpus) in limits:
            room = Amount(
                room.mcpu if quota.max_cpu is None else min(room.mcpu, round((quota.max_cpu - cpu) * 1000)),
                room.memory_mb if quota.max_memory_mb is None else min(room.memory_mb, quota.max_memory_mb - mem),
                room.gpus if quota.max_gpus is None else min(room.gpus, quota.max_gpus - gpus))
        return None if room == Amount(big, big, big) else room

    async def clear(self, demand: Demand, now: datetime) -> bool:
        """Preempt the victims of the demand's plan, if it has one; False when one of them could not be: the demand's
        place is given back and that victim (its record unchanged) counts on its agents again; the demand waits for
        the next pass."""
        planned = self.plans.get(demand.run_id)
        if planned is None:
            return True
        plan, saved = planned
        results = await asyncio.gather(*(self._preempt(demand, plan, v, now) for v in plan.victims),
                                       return_exceptions=True)
        kept = []
        for victim, held, result in zip(plan.victims, saved, results, strict=True):
            if isinstance(result, BaseException):
                self.ctx.log.warning("preemption not written; the run goes on", run_id=victim.run_id,
                                     for_run=demand.run_id, error=str(result))
                kept.append(held)
        if not kept:
            return True
        self.plans.pop(demand.run_id, None)
        self.view.unhold(demand.run_id)  # its place first, so that the runs still out are counted on what it frees
        for held in kept:
            self.view.adopt_again(held)
        return False

    def done(self, run_id: str) -> None:
        self.plans.pop(run_id, None)

    async def _preempt(self, demand: Demand, plan: Plan, victim: Holder, now: datetime) -> None:
        assert victim.guards is not None
        grace = victim.guards.grace_seconds
        settings = self.ctx.settings
        new = await preempt_run(self.ctx.runs, self.ctx.leases, self.ctx.rpc, victim.run_id, victim.attempt,
                                plan.victim_reason(), now, settings.run_lease_ttl, grace)
        if new is None:
            return  # it ended (or was lost or cancelled) meanwhile: its place is free all the same
        metrics.child(metrics.PREEMPTIONS, queue=victim.queue, reason=plan.short).inc()
        self.ctx.log.info("run preempted", run_id=victim.run_id, attempt=victim.attempt, by_run=plan.run_id,
                          freed=f"{plan.freed_text} on {plan.where}", grace=grace)
        assert new.spec is not None
        event = RunPreempted(run_id=victim.run_id, attempt=victim.attempt, job=new.job, tenant=victim.tenant,
                             queue=victim.queue, priority=victim.priority, agents=sorted(victim.holds),
                             by_run=plan.run_id, by_tenant=demand.tenant,
                             by_priority=plan.priority, freed=f"{plan.freed_text} on {plan.where}",
                             grace_seconds=grace, reason=plan.victim_reason(), at=now)
        try:
            await self.ctx.publisher.publish(s.event_subject("preempted", s.PLACEMENT_SOURCE), event,
                                             msg_id=s.msg_id(victim.run_id, victim.attempt, "preempted"),
                                             ttl=stream_ttl(new.keep_seconds, settings.history))
        except JetcronError as exc:  # the record says it already; the audit trail misses one line
            self.ctx.log.warning("preemption event not written", run_id=victim.run_id, error=str(exc))

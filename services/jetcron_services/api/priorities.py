"""Moving runs that have not started to another priority (and queue): the run record's CAS, then an event on the
audit trail saying who asked. Placement follows the record (services/jetcron_services/placement: the queued demand moves
at once). A tenant stays within its policy's ceiling (TenantPolicy.max_priority); the admin is not held by it."""

from __future__ import annotations

from jetcron.core.errors import Forbidden, InvalidSpec
from jetcron.core.ids import QUEUE_RE
from jetcron.core.lifecycle.retention import stream_ttl
from jetcron.core.lifecycle.runs import priority_allowed, reprioritized
from jetcron.core.models import Priority, Run
from jetcron.wire import subjects as s
from jetcron.wire.messages import RunReprioritized
from jetcron_services.api.ports import CheckCeilingPorts, MovePorts

SOURCE = "api"


def parse(priority: object, queue: object) -> tuple[Priority, str | None]:
    if not isinstance(priority, str) or priority not in {p.value for p in Priority}:
        raise InvalidSpec("priority", priority, f"must be one of {', '.join(p.value for p in Priority)}")
    wanted = Priority(priority)
    if queue is not None and not (isinstance(queue, str) and QUEUE_RE.fullmatch(queue)):
        raise InvalidSpec("queue", queue, "must be 1-63 letters, digits, '-' or '_'")
    return wanted, queue


async def check_ceiling(ctx: CheckCeilingPorts, tenant: str, priority: Priority, caller: str | None) -> None:
    """A tenant's own request may not go above its policy's ceiling (the admin's may)."""
    if caller is None:
        return
    found = await ctx.tenants.maybe(tenant)
    ceiling = found[0].max_priority if found is not None else None
    if not priority_allowed(priority, ceiling):
        raise Forbidden(f"tenant {tenant!r} may use priorities up to {ceiling} (its policy): {priority} is above")


def by(caller: str | None) -> str:
    return "admin" if caller is None else f"tenant:{caller}"


async def move(ctx: MovePorts, run_id: str, priority: Priority, queue: str | None, caller: str | None) -> Run:
    """CAS the run to the new priority and queue (Conflict once it has started), then tell the audit trail."""
    done = await ctx.runs.change(run_id, lambda run: reprioritized(run, priority, queue))
    assert done is not None  # reprioritized() changes the run or raises
    old, new, _ = done
    assert old.spec is not None and new.spec is not None
    if (old.spec.priority, old.spec.queue) != (new.spec.priority, new.spec.queue):
        await ctx.publisher.publish(s.event_subject("reprioritized", SOURCE), RunReprioritized(
            run_id=run_id, job=new.job, tenant=new.tenant, priority_from=old.spec.priority,
            priority_to=new.spec.priority, queue_from=old.spec.queue, queue_to=new.spec.queue, by=by(caller),
            at=ctx.clock.now()), ttl=stream_ttl(new.keep_seconds, ctx.settings.history))
    return new

"""Tenant verbs (admin only): set a tenant's policy (weight, quotas, queues, retention, preemption), list them."""

from __future__ import annotations

import math

import msgspec

from jetcron.core.errors import InvalidSpec
from jetcron.core.ids import TENANT_RE
from jetcron.core.lifecycle.retention import validate_history
from jetcron.core.models import QueueQuota, TenantPolicy
from jetcron.core.placing.fairness import validate_queue_quotas
from jetcron.core.placing.preemption import validate_preemption
from jetcron.wire import verbs as v
from jetcron.wire.api import Page
from jetcron_services.api.call import Call
from jetcron_services.api.ports import TenantsPorts
from jetcron_services.api.registry import Noun, verb
from jetcron_services.api.requests import body


class Tenants(Noun):
    noun = "tenants"

    def __init__(self, ctx: TenantsPorts) -> None:
        self.ctx = ctx

    @verb
    async def set(self, call: Call) -> TenantPolicy:
        req = body(call.data, TenantPolicy)
        _check_queue_shapes(req.get("queues"))
        try:
            policy = msgspec.convert(req, TenantPolicy)
        except msgspec.ValidationError as exc:
            raise InvalidSpec("tenant", req, str(exc)) from None
        if not TENANT_RE.fullmatch(policy.tenant):
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

    @verb
    async def list(self, call: Call) -> Page[TenantPolicy]:
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

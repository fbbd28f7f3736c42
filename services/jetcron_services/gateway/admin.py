"""Admin routes: the cluster's leaders, agents and tenants (a tenant's token is answered 403 by the API)."""

from __future__ import annotations

from typing import Annotated, Any

import msgspec
from litestar import Request, get, put
from litestar.params import Parameter

from jetcron.core.models import AgentInfo, Preemption, Priority, QueueQuota, TenantPolicy
from jetcron.wire.api import ClusterStatus, Page
from jetcron_services.gateway.gate import API, strict_body
from jetcron_services.gateway.gate import who as _who


@get(f"{API}/cluster", summary="Leaders, trigger shard holders and the placement queue (admin)")
async def cluster_status(request: Request[Any, Any, Any]) -> ClusterStatus:
    gate, caller = await _who(request)
    return await gate.api(caller, lambda c: c.cluster.status())


@get(f"{API}/agents", summary="Agents by id (admin; cursor pagination)")
async def list_agents(request: Request[Any, Any, Any], cursor: str | None = None,
                      limit: Annotated[int, Parameter(ge=1, le=1000)] = 100) -> Page[AgentInfo]:
    gate, caller = await _who(request)
    return await gate.api(caller, lambda c: c.agents.list(cursor=cursor, limit=limit))


class TenantPolicyBody(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    weight: float = 1.0
    """Its share of the cluster against the other tenants'."""
    max_cpu: float | None = None
    max_memory_mb: int | None = None
    max_gpus: int | None = None
    max_submits_per_second: float | None = None
    max_pending_runs: int | None = None
    queues: dict[str, QueueQuota] | None = None
    max_priority: Priority | None = None
    """The highest priority the tenant's jobs and runs may ask for; absent: any."""
    """Quotas per named queue of the tenant, e.g. {"batch": {"max_cpu": 8}}: a queue at its quota waits while the
    tenant's other queues go on."""
    preemption: Preemption | None = None
    """Whether its running runs may be preempted by waiting runs of higher priority, and the guards
    (docs/preemption.md); absent: never."""
    allow_run_as_root: bool = False
    """Whether its jobs may ask to run as root (on agents that allow it too); absent: no."""


@get(f"{API}/tenants", summary="Tenants' weights and quotas (admin)")
async def list_tenants(request: Request[Any, Any, Any]) -> Page[TenantPolicy]:
    gate, caller = await _who(request)
    return await gate.api(caller, lambda c: c.tenants.list())


@put(f"{API}/tenants/{{tenant:str}}", summary="Set a tenant's weight and quotas (admin)")
async def set_tenant(request: Request[Any, Any, Any], tenant: str, data: dict[str, Any]) -> TenantPolicy:
    gate, caller = await _who(request)
    body = strict_body(data, TenantPolicyBody)
    return await gate.api(caller, lambda c: c.tenants.set(tenant, **msgspec.structs.asdict(body)))


ROUTES: list[Any] = [cluster_status, list_agents, list_tenants, set_tenant]

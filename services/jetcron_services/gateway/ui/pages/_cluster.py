"""The agents and tenants pages: what each agent holds, and what each tenant's running runs use."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from litestar import Request, get
from litestar.response import Template

from jetcron.core.lifecycle.run_state import RunState
from jetcron.sdk.errors import ApiError
from jetcron_services.gateway.ui import present
from jetcron_services.gateway.ui.pages._kit import PAGE, page_context, tolerant
from jetcron_services.gateway.ui.session import UI


@get(f"{UI}/agents", include_in_schema=False)
async def agents_page(request: Request[Any, Any, Any], cursor: str | None = None) -> Template:
    """A cursor page of the agents by id (10,000 agents are 10,000 records: the page reads its own)."""
    ctx = page_context(request)
    now = datetime.now(UTC)
    found = await tolerant(ctx.client.agents.list(cursor=cursor or None, limit=PAGE))
    rows = []
    if not isinstance(found, ApiError):
        for a in found.items:
            cpu_used = a.cpu - (a.free_cpu if a.free_cpu is not None else a.cpu)
            mem_used = a.memory_mb - (a.free_memory_mb if a.free_memory_mb is not None else a.memory_mb)
            gpu_used = a.gpus - (a.free_gpus if a.free_gpus is not None else a.gpus)
            bars = [("cpu", round(cpu_used, 2), a.cpu), ("memory MiB", mem_used, a.memory_mb)]
            if a.gpus:
                bars.append(("GPUs", gpu_used, a.gpus))
            if a.slots:
                bars.append(("slots", a.running, a.slots))
            rows.append({"agent": a, "bars": present.hbars(bars),
                         "age": present.duration((now - a.heartbeat_at).total_seconds())})
    return ctx.page("agents.html", rows=rows, denied=found if isinstance(found, ApiError) else None,
                    next_cursor=None if isinstance(found, ApiError) else found.next_cursor)


@get(f"{UI}/tenants", include_in_schema=False)
async def tenants_page(request: Request[Any, Any, Any]) -> Template:
    ctx = page_context(request)
    found = await tolerant(ctx.client.tenants.list())
    use: dict[str, dict[str, float]] = {}
    if not isinstance(found, ApiError):
        running = await tolerant(ctx.client.runs.list(state=RunState.RUNNING, limit=1000))
        if not isinstance(running, ApiError):
            for run in running.items:
                spent = use.setdefault(run.tenant, {"cpu": 0.0, "memory_mb": 0.0, "gpus": 0.0, "runs": 0.0})
                resources = run.spec.resources if run.spec else None
                spent["runs"] += 1
                if resources is not None:
                    spent["cpu"] += resources.cpu
                    spent["memory_mb"] += resources.memory_mb
                    spent["gpus"] += resources.gpus
    return ctx.page("tenants.html", tenants=[] if isinstance(found, ApiError) else found.items, use=use,
                    denied=found if isinstance(found, ApiError) else None)

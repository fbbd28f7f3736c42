"""Run routes: list, get, cancel, logs (streamed with ?follow=1); the dead-letter queue."""

from __future__ import annotations

from typing import Annotated, Any

from litestar import Request, Response, get, post
from litestar.params import Parameter
from litestar.response import Stream

from jetcron.services.gateway.gate import API
from jetcron.services.gateway.gate import who as _who


@get(f"{API}/runs", summary="List runs (by job, state, queue; cursor pagination)")
async def list_runs(request: Request[Any, Any, Any], job: str | None = None,
                    run_state: Annotated[str | None, Parameter(query="state")] = None,
                    queue: str | None = None, cursor: str | None = None, limit: int = 50) -> Any:
    gate, who = await _who(request)
    payload = {k: v for k, v in {"job": job, "state": run_state, "queue": queue, "cursor": cursor}.items() if v}
    return await gate.call(who, "runs.list", {**payload, "limit": limit})


@get(f"{API}/runs/{{run_id:str}}", summary="A run, with every attempt")
async def get_run(request: Request[Any, Any, Any], run_id: str) -> Any:
    gate, who = await _who(request)
    return await gate.call(who, "runs.get", {"run_id": run_id})


@post(f"{API}/runs/{{run_id:str}}/cancel", status_code=200, summary="Cancel a run")
async def cancel_run(request: Request[Any, Any, Any], run_id: str) -> Any:
    gate, who = await _who(request)
    return await gate.call(who, "runs.cancel", {"run_id": run_id, "reason": "cancelled through the REST API"})


@get(f"{API}/runs/{{run_id:str}}/logs", summary="A run's output; ?follow=1 streams it until the run ends",
     media_type="text/plain")
async def run_logs(request: Request[Any, Any, Any], run_id: str, follow: bool = False) -> Any:
    gate, who = await _who(request)
    if not follow:
        logs = await gate.call(who, "runs.logs", {"run_id": run_id})
        return Response(str(logs["output"]), media_type="text/plain; charset=utf-8")
    await gate.call(who, "runs.get", {"run_id": run_id})  # a 404 before the stream starts, not inside it
    client = gate.client(who.tenant)
    return Stream(client.follow_logs(run_id, through_api=True), media_type="text/plain; charset=utf-8")


@get(f"{API}/dlq", summary="Dead-lettered runs (newest last)")
async def list_dlq(request: Request[Any, Any, Any], limit: Annotated[int, Parameter(ge=1, le=1000)] = 100) -> Any:
    gate, caller = await _who(request)
    return await gate.call(caller, "dlq.list", {"limit": limit})


@post(f"{API}/dlq/{{run_id:str}}/replay", status_code=201, summary="Run a dead or failed run again, as a new run")
async def replay(request: Request[Any, Any, Any], run_id: str) -> Any:
    gate, caller = await _who(request)
    return await gate.call(caller, "dlq.replay", {"run_id": run_id})


ROUTES: list[Any] = [list_runs, get_run, cancel_run, run_logs, list_dlq, replay]

"""Run routes: list, get, cancel, logs (streamed with ?follow=1); the dead-letter queue."""

from __future__ import annotations

from typing import Annotated, Any

import msgspec
from litestar import Request, Response, get, post
from litestar.params import Parameter
from litestar.response import Stream

from jetcron.core.lifecycle.notify import Delivery
from jetcron.core.models import Priority, Run
from jetcron.wire.api import Page
from jetcron_services.gateway import status as words
from jetcron_services.gateway.gate import API, HttpProblem, WholeResponse, held, idempotency_key, strict_body
from jetcron_services.gateway.gate import who as _who
from jetcron_services.gateway.listing import runs_page

TEXT = "text/plain; charset=utf-8"


@get(f"{API}/runs", summary="List runs (by job, state, queue; cursor pagination)")
async def list_runs(request: Request[Any, Any, Any], job: str | None = None,
                    run_state: Annotated[str | None, Parameter(query="state")] = None,
                    queue: str | None = None, cursor: str | None = None, limit: int = 50,
                    newest: bool = False) -> Page[Run]:
    gate, caller = await _who(request)
    if run_state is None:
        return await gate.api(caller, lambda c: c.runs.list(job=job, queue=queue, cursor=cursor, limit=limit,
                                                             newest=newest or None))
    states = words.run_states(run_state)
    if states is None:
        raise HttpProblem(words.unknown("state", run_state, words.RUN_WORDS))
    return await gate.api(caller, lambda c: runs_page(c, states, job=job, queue=queue, cursor=cursor, limit=limit,
                                                       newest=newest))


@get(f"{API}/runs/{{run_id:str}}", summary="A run, with every attempt")
async def get_run(request: Request[Any, Any, Any], run_id: str) -> Run:
    gate, caller = await _who(request)
    return await gate.api(caller, lambda c: c.runs.get(run_id))


@post(f"{API}/runs/{{run_id:str}}/cancel", status_code=200, summary="Cancel a run")
async def cancel_run(request: Request[Any, Any, Any], run_id: str) -> Run:
    gate, caller = await _who(request)
    return await gate.api(caller, lambda c: c.runs.cancel(run_id, reason="cancelled through the REST API"))


class PriorityBody(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    priority: Priority
    queue: str | None = None
    """Also move it to this queue of its tenant; absent: it stays in its own."""


@post(f"{API}/runs/{{run_id:str}}/priority", status_code=200,
      summary="Move a run that has not started to another priority (and queue)")
async def set_priority(request: Request[Any, Any, Any], run_id: str, data: dict[str, Any]) -> Run:
    gate, caller = await _who(request)
    body = strict_body(data, PriorityBody)
    return await gate.api(caller, lambda c: c.runs.set_priority(run_id, body.priority, queue=body.queue))


@get(f"{API}/runs/{{run_id:str}}/logs", summary="A run's output; ?follow=1 streams it until the run ends",
     media_type="text/plain")
async def run_logs(request: Request[Any, Any, Any], run_id: str, follow: bool = False) -> Response[Any]:
    gate, caller = await _who(request)
    if not follow:
        logs = await gate.api(caller, lambda c: c.runs.logs(run_id))
        return Response(logs.output, media_type=TEXT)
    await gate.api(caller, lambda c: c.runs.get(run_id))  # a 404 before the stream starts, not inside it
    slot = gate.followers.take(caller, request.query_params.get("follow", "true"))
    return Stream(held(slot, gate.client(caller.tenant).follow_logs(run_id, through_api=True)), media_type=TEXT)


@get(f"{API}/dlq", summary="Dead-lettered runs (newest last)")
async def list_dlq(request: Request[Any, Any, Any],
                   limit: Annotated[int, Parameter(ge=1, le=1000)] = 100) -> Page[Run]:
    gate, caller = await _who(request)
    return await gate.api(caller, lambda c: c.dlq.list(limit=limit))


@post(f"{API}/dlq/{{run_id:str}}/replay", status_code=201, summary="Run a dead or failed run again, as a new run",
      description="`Idempotency-Key`: a retried request answers the same new run.")
async def replay(request: Request[Any, Any, Any], run_id: str) -> WholeResponse[Run]:
    gate, caller = await _who(request)
    key = idempotency_key(request)
    run = await gate.api(caller, lambda c: c.dlq.replay(run_id, key=key))
    return WholeResponse(run, status_code=201, headers={"Location": f"{API}/runs/{run.run_id}"})


@get(f"{API}/jobs/{{job_id:str}}/notifications", summary="A job's notification deliveries, each with every try")
async def list_notifications(request: Request[Any, Any, Any], job_id: str,
                             delivery_state: Annotated[str | None, Parameter(query="state")] = None,
                             cursor: str | None = None,
                             limit: Annotated[int, Parameter(ge=1, le=1000)] = 100) -> Page[Delivery]:
    gate, caller = await _who(request)
    return await gate.api(caller, lambda c: c.notifications.list(job_id, state=delivery_state, cursor=cursor,
                                                                 limit=limit))


@post(f"{API}/notifications/{{delivery_id:str}}/redeliver", status_code=202,
      summary="Try a parked delivery again (a fresh set of tries; its log is kept)")
async def redeliver(request: Request[Any, Any, Any], delivery_id: str) -> Delivery:
    gate, caller = await _who(request)
    return await gate.api(caller, lambda c: c.notifications.redeliver(delivery_id))


ROUTES: list[Any] = [list_runs, get_run, cancel_run, set_priority, run_logs, list_dlq, replay, list_notifications,
                     redeliver]

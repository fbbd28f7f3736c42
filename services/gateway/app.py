"""The REST routes: each authenticates the bearer token, then calls the API service's verb for its tenant.

No logic of the API lives here: a route reads the request, calls one or a few verbs through the SDK, and shapes
the reply (design.py). Errors leave as RFC 9457 problems (problems.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Annotated, Any

import msgspec
from litestar import Litestar, Request, Response, delete, get, post
from litestar.exceptions import HTTPException, ValidationException
from litestar.openapi import OpenAPIConfig
from litestar.openapi.plugins import RedocRenderPlugin
from litestar.openapi.spec import Components, SecurityScheme
from litestar.params import Parameter
from litestar.response import Redirect, Stream

from jetcron.auth.tokens import TokenRecord, token_id_of, verify
from jetcron.core.models import RunState
from jetcron.sdk.client import ApiError, Client
from jetcron.services.gateway.design import Created, CreateJob, JobPage, JobStatusView, job_spec, job_status, rest_field
from jetcron.services.gateway.problems import PROBLEM_JSON, Problem, headers_for, problem, status_of
from jetcron.telemetry import metrics

API = "/api/v1"
OPENAPI = "/api/docs"
MAX_BODY = 1024 * 1024
TERMINAL = {st.value for st in RunState if st.terminal}


class HttpProblem(Exception):
    def __init__(self, body: Problem, headers: dict[str, Any] | None = None) -> None:
        super().__init__(body.detail)
        self.body = body
        self.headers = headers or {}


@dataclass
class Gate:
    """What the routes need: who holds a token, and a client for a tenant (None: the admin)."""

    lookup: Callable[[str], TokenRecord | None]
    client: Callable[[str | None], Client]
    ready: Callable[[], str | None]

    def principal(self, request: Request[Any, Any, Any]) -> TokenRecord:
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        token = token.strip()
        token_id = token_id_of(token) if scheme.lower() == "bearer" else None
        record = self.lookup(token_id) if token_id else None
        if record is None or not verify(token, record):
            metrics.AUTH_FAILURES.labels(kind="http_token").inc()
            raise HttpProblem(problem(401, "a valid bearer token is required (Authorization: Bearer jct_...; "
                                      "`jetcron tokens create --tenant NAME` issues one)", code="unauthorized"),
                              {"WWW-Authenticate": 'Bearer realm="jetcron"'})
        return record

    async def call(self, who: TokenRecord, verb: str, payload: dict[str, Any]) -> Any:
        try:
            return await self.client(who.tenant).call(verb, payload)
        except ApiError as exc:
            status = status_of(exc.code, exc.retryable)
            field = rest_field(exc.field) if verb == "jobs.create" else exc.field
            raise HttpProblem(problem(status, str(exc), code=exc.code, field=field, value=exc.value),
                              headers_for(status, exc.retryable)) from None


def _gate(request: Request[Any, Any, Any]) -> Gate:
    gate: Gate = request.app.state.gate
    return gate


async def _who(request: Request[Any, Any, Any]) -> tuple[Gate, TokenRecord]:
    gate = _gate(request)
    return gate, gate.principal(request)


def _problem_response(body: Problem, headers: dict[str, Any] | None = None) -> Response[bytes]:
    return Response(msgspec.json.encode(body), status_code=body.status, media_type=PROBLEM_JSON,
                    headers=headers or {})


async def _latest_run(gate: Gate, who: TokenRecord, job: str) -> dict[str, Any] | None:
    """The job's newest run: run ids sort by their occurrence's instant (ids.run_id)."""
    cursor: str | None = None
    last: dict[str, Any] | None = None
    while True:
        page = await gate.call(who, "runs.list", {"job": job, "limit": 1000, **({"cursor": cursor} if cursor else {})})
        if page["items"]:
            last = page["items"][-1]
        cursor = page.get("next_cursor")
        if not cursor:
            return last


async def _runs_of(gate: Gate, who: TokenRecord, job: str) -> AsyncIterator[dict[str, Any]]:
    cursor: str | None = None
    while True:
        page = await gate.call(who, "runs.list", {"job": job, "limit": 1000, **({"cursor": cursor} if cursor else {})})
        for item in page["items"]:
            yield item
        cursor = page.get("next_cursor")
        if not cursor:
            return


@post(f"{API}/jobs", status_code=201, summary="Create a job",
      description="The design's body; `Idempotency-Key` makes a retried create return the same job.")
async def create_job(request: Request[Any, Any, Any], data: CreateJob) -> Created:
    gate, who = await _who(request)
    payload: dict[str, Any] = {"spec": job_spec(data)}
    if key := request.headers.get("idempotency-key"):
        payload["idempotency_key"] = key
    await gate.call(who, "jobs.create", payload)
    # The body names no tenant: the admin's jobs go to the default tenant, whose keys are bare names.
    return Created(job_id=data.name, status="queued")


@get(f"{API}/jobs/{{job_id:str}}", summary="A job and its latest run")
async def get_job(request: Request[Any, Any, Any], job_id: str) -> JobStatusView:
    gate, who = await _who(request)
    view = await gate.call(who, "jobs.get", {"name": job_id})
    return job_status(view["job"], await _latest_run(gate, who, job_id), who.tenant)


@get(f"{API}/jobs", summary="List jobs (filter by queue and latest status; cursor pagination)")
async def list_jobs(request: Request[Any, Any, Any], queue: str | None = None, status: str | None = None,
                    cursor: str | None = None, limit: int = 50) -> JobPage:
    gate, who = await _who(request)
    payload: dict[str, Any] = {"limit": limit}
    if queue is not None:
        payload["queue"] = queue
    if cursor is not None:
        payload["cursor"] = cursor
    page = await gate.call(who, "jobs.list", payload)
    views = await asyncio.gather(*(_view(gate, who, job) for job in page["items"]))
    return JobPage(items=[v for v in views if status is None or v.status == status],
                   next_cursor=page.get("next_cursor"))


async def _view(gate: Gate, who: TokenRecord, job: dict[str, Any]) -> JobStatusView:
    shown = job_status(job, None, who.tenant)
    return job_status(job, await _latest_run(gate, who, shown.job_id), who.tenant)


@post(f"{API}/jobs/{{job_id:str}}/cancel", status_code=200, summary="Cancel every unfinished run of the job")
async def cancel_job(request: Request[Any, Any, Any], job_id: str) -> dict[str, Any]:
    gate, who = await _who(request)
    await gate.call(who, "jobs.get", {"name": job_id})  # a 404 for a job the caller cannot see
    cancelled = []
    async for run in _runs_of(gate, who, job_id):
        if run["state"] not in TERMINAL:
            await gate.call(who, "runs.cancel", {"run_id": run["run_id"], "reason": "cancelled through the REST API"})
            cancelled.append(run["run_id"])
    return {"job_id": job_id, "cancelled": cancelled}


def _verb_route(path: str, verb: str, summary: str) -> Any:
    @post(f"{API}/jobs/{{job_id:str}}/{path}", status_code=200, summary=summary, name=f"job_{path}")
    async def route(request: Request[Any, Any, Any], job_id: str) -> Any:
        gate, who = await _who(request)
        payload: dict[str, Any] = {"name": job_id}
        if verb == "jobs.trigger" and (key := request.headers.get("idempotency-key")):
            payload["key"] = key
        return await gate.call(who, verb, payload)

    return route


@delete(f"{API}/jobs/{{job_id:str}}", status_code=200, summary="Delete a job (its runs are kept)")
async def delete_job(request: Request[Any, Any, Any], job_id: str) -> Any:
    gate, who = await _who(request)
    return await gate.call(who, "jobs.delete", {"name": job_id})


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


@get(f"{API}/agents", summary="Agents (admin)")
async def list_agents(request: Request[Any, Any, Any]) -> Any:
    gate, who = await _who(request)
    return await gate.call(who, "agents.list", {})


@get(f"{API}/openapi.json", include_in_schema=False, media_type="application/vnd.oai.openapi+json")
async def openapi_json(request: Request[Any, Any, Any]) -> dict[str, Any]:
    return request.app.openapi_schema.to_schema()


@get(f"{API}/docs", include_in_schema=False)
async def docs() -> Redirect:
    return Redirect(OPENAPI)


@get("/livez", include_in_schema=False)
async def livez() -> str:
    return "ok"


@get("/readyz", include_in_schema=False)
async def readyz(request: Request[Any, Any, Any]) -> Response[str]:
    why = _gate(request).ready()
    return Response("ready" if why is None else why, status_code=200 if why is None else 503,
                    media_type="text/plain")


def _on_problem(_: Request[Any, Any, Any], exc: HttpProblem) -> Response[bytes]:
    return _problem_response(exc.body, exc.headers)


def _on_validation(_: Request[Any, Any, Any], exc: ValidationException) -> Response[bytes]:
    """Litestar's own body and parameter checks: malformed JSON is 400, a well-formed body that fails is 422."""
    detail = str(exc.detail)
    extra = exc.extra if isinstance(exc.extra, list) else []
    first = extra[0] if extra and isinstance(extra[0], dict) else {}
    message = str(first.get("message", detail))
    key = first.get("key")
    field = _field_of(message) or (key if key != "data" else None)
    malformed = "malformed" in detail.lower() or "JSON is malformed" in message or "truncated" in message
    return _problem_response(problem(400 if malformed else 422, message if message else detail,
                                     code="invalid", field=str(field) if field else None))


def _field_of(message: str) -> str | None:
    """msgspec says `... - at `$.resources.cpu``, or `Object contains unknown field `x``."""
    if "unknown field `" in message:
        return message.split("unknown field `", 1)[1].split("`", 1)[0]
    if "- at `$" in message:
        return message.split("- at `$", 1)[1].rstrip("`").lstrip(".") or None
    return None


def _on_http(_: Request[Any, Any, Any], exc: HTTPException) -> Response[bytes]:
    status = exc.status_code
    return _problem_response(problem(status, str(exc.detail), code="invalid" if status < 500 else "internal"),
                             exc.headers)


def _on_error(_: Request[Any, Any, Any], exc: Exception) -> Response[bytes]:
    return _problem_response(problem(500, f"internal error ({type(exc).__name__})", code="internal"))


_ROUTES: list[Any] = [
    create_job, get_job, list_jobs, cancel_job, delete_job,
    _verb_route("pause", "jobs.pause", "Pause a job (no new occurrences fire)"),
    _verb_route("resume", "jobs.resume", "Resume a paused job"),
    _verb_route("trigger", "jobs.trigger", "Run a job now (Idempotency-Key names the run)"),
    list_runs, get_run, cancel_run, run_logs, list_agents, openapi_json, docs, livez, readyz,
]


def build_app(gate: Gate) -> Litestar:
    handlers: dict[Any, Callable[..., Any]] = {
        HttpProblem: _on_problem, ValidationException: _on_validation, HTTPException: _on_http, Exception: _on_error,
    }
    openapi = OpenAPIConfig(
        # Not under /api/v1: Litestar's OpenAPI router would answer every unknown /api/v1 path with an HTML 404.
        title="jetcron", version="1", path=OPENAPI, render_plugins=[RedocRenderPlugin(path="/")],
        components=Components(security_schemes={"bearer": SecurityScheme(type="http", scheme="bearer")}),
        security=[{"bearer": []}],
        description="The jetcron REST API (docs/rest-api.md). Every route takes `Authorization: Bearer <token>`.")
    app = Litestar(route_handlers=_ROUTES, openapi_config=openapi, exception_handlers=handlers,
                   request_max_body_size=MAX_BODY, debug=False)
    app.state.gate = gate
    return app


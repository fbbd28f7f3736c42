"""A run's page, its state and live output, its actions, and the dead letters."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from litestar import Request, Response, get, post
from litestar.response import ServerSentEvent, Template
from litestar.response.sse import ServerSentEventMessage

from jetcron.core.ids import replay_of, stamp_of
from jetcron.core.lifecycle.run_state import RunState
from jetcron.sdk.client import Client
from jetcron_services.gateway.gate import held
from jetcron_services.gateway.ui import present
from jetcron_services.gateway.ui.pages._kit import page_context, read_form, run_action
from jetcron_services.gateway.ui.session import UI


@get(f"{UI}/runs/{{run_id:str}}", include_in_schema=False)
async def run_page(request: Request[Any, Any, Any], run_id: str) -> Template:
    ctx = page_context(request)
    run = await ctx.client.runs.get(run_id)
    trace = ctx.trace_url.replace("{trace_id}", run.trace_id) if ctx.trace_url and run.trace_id else ""
    return ctx.page("run.html", run=run, job=ctx.job_of_run(run), trace=trace, duration=present.duration,
                    ended=RunState(run.state).terminal, timeline=present.timeline(run, datetime.now(UTC)))


@get(f"{UI}/runs/{{run_id:str}}/state", include_in_schema=False)
async def run_state(request: Request[Any, Any, Any], run_id: str) -> Template:
    """The run's state and why it waits: the fragment the run page polls while the run is live."""
    ctx = page_context(request)
    run = await ctx.client.runs.get(run_id)
    return ctx.page("_run_state.html", run=run, ended=RunState(run.state).terminal)


@get(f"{UI}/runs/{{run_id:str}}/log", include_in_schema=False)
async def run_log(request: Request[Any, Any, Any], run_id: str) -> ServerSentEvent:
    """The run's output as server-sent events (`log`, JSON text) and one `end` with its final state."""
    ctx = page_context(request)
    client = ctx.client
    await client.runs.get(run_id)  # a 404 before the stream starts, not inside it
    slot = ctx.gate.followers.take(ctx.who, "live output")

    async def events() -> AsyncIterator[ServerSentEventMessage]:
        async for chunk in client.follow_logs(run_id, through_api=True):
            yield ServerSentEventMessage(event="log", data=json.dumps(chunk.decode(errors="replace")))
        final = await client.runs.get(run_id)
        yield ServerSentEventMessage(event="end", data=json.dumps(str(final.state)))

    return ServerSentEvent(held(slot, events()))


@post(f"{UI}/runs/{{run_id:str}}/cancel", include_in_schema=False)
async def cancel_run(request: Request[Any, Any, Any], run_id: str) -> Response[Any]:
    async def cancel(c: Client) -> str:
        await c.runs.cancel(run_id, reason="cancelled from the dashboard")
        return "cancelled"

    return await run_action(request, f"{UI}/runs/{quote(run_id)}", cancel)


@post(f"{UI}/runs/{{run_id:str}}/priority", include_in_schema=False)
async def set_run_priority(request: Request[Any, Any, Any], run_id: str) -> Response[Any]:
    """A waiting run moved to another priority (runs.set_priority): as the viewer, within its tenant's ceiling."""
    form = await read_form(request)

    async def move(c: Client) -> str:
        run = await c.runs.set_priority(run_id, form.get("priority", ""))
        return f"priority {run.spec.priority if run.spec else ''}"

    return await run_action(request, f"{UI}/runs/{quote(run_id)}", move)


@get(f"{UI}/dlq", include_in_schema=False)
async def dlq_page(request: Request[Any, Any, Any]) -> Template:
    ctx = page_context(request)
    page = await ctx.client.dlq.list(limit=500)
    # A replay that died too is a row of its own beside its original: each names its run, and a replay its original
    return ctx.page("dlq.html", runs=list(reversed(page.items)), job_of=ctx.job_of_run, replay_of=replay_of,
                    stamp_of=stamp_of)


@post(f"{UI}/dlq/{{run_id:str}}/replay", include_in_schema=False)
async def replay(request: Request[Any, Any, Any], run_id: str) -> Response[Any]:
    async def again(c: Client) -> str:
        run = await c.dlq.replay(run_id)
        return f"{UI}/runs/{quote(run.run_id)}"

    return await run_action(request, f"{UI}/dlq", again)

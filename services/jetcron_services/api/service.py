"""The api service: a nats.micro service in a queue group; each verb validates, stores, then answers."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import structlog
from opentelemetry.trace import SpanKind

from jetcron import __version__
from jetcron.bus.ports import Endpoint, Request
from jetcron.telemetry import metrics
from jetcron.telemetry.tracing import extract_context, messaging_span, tracer
from jetcron.wire import subjects as s
from jetcron.wire.api import PLAIN_FAILURE, Reply, error_reply
from jetcron.wire.codec import encode, with_defaults
from jetcron_services.api.admission import Admission
from jetcron_services.api.agents import Agents
from jetcron_services.api.calendars import Calendars
from jetcron_services.api.call import Call
from jetcron_services.api.cluster import Cluster
from jetcron_services.api.dlq import Dlq
from jetcron_services.api.intake import Intake
from jetcron_services.api.jobs import Jobs
from jetcron_services.api.mint import serve_mint
from jetcron_services.api.notifications import Notifications
from jetcron_services.api.ports import NounsPorts
from jetcron_services.api.registry import Handler, Noun, served
from jetcron_services.api.room import serve_room
from jetcron_services.api.runs import Runs
from jetcron_services.api.secrets import Secrets
from jetcron_services.api.submissions import Submissions
from jetcron_services.api.tenants import Tenants
from jetcron_services.api.tokens import Tokens
from jetcron_services.runtime import Context, background

log = structlog.get_logger("jetcron.api")
_tracer = tracer("api")


# nats-py runs a subscription's callback one message at a time; a write waits for fsync, so requests are
# answered from their own tasks (bounded) or the API would do one write per fsync, end to end.
_inflight = asyncio.Semaphore(512)
_tasks: set[asyncio.Task[None]] = set()


def endpoint(verb: str, op: Handler) -> Callable[[Request], Awaitable[None]]:
    """One place turns results and errors into replies: nothing is answered 'accepted' before it is stored."""

    async def answer(request: Request) -> None:
        tenant = s.parse_api_subject(request.subject)
        with messaging_span(_tracer, "process", s.api_subject(verb, tenant), parent=extract_context(request.headers),
                            kind=SpanKind.SERVER):
            try:
                reply = Reply(ok=True, result=await op(Call(request.data, tenant)))
                metrics.child(metrics.API_REQUESTS, verb=verb, outcome="ok").inc()
            except Exception as exc:
                reply = error_reply(exc)
                outcome = reply.error.code if reply.error else "error"
                metrics.child(metrics.API_REQUESTS, verb=verb, outcome=outcome).inc()
                if outcome == "internal":
                    log.exception("api verb failed", verb=verb)
            try:
                data = encode(with_defaults(reply))  # every field of a record, those at their defaults too
            except Exception:
                log.exception("api reply could not be encoded", verb=verb)
                data = PLAIN_FAILURE
            await request.respond(data)

    def _finished(task: asyncio.Task[None]) -> None:
        _tasks.discard(task)
        _inflight.release()

    async def handle(request: Request) -> None:
        await _inflight.acquire()
        task = asyncio.create_task(answer(request))
        _tasks.add(task)
        task.add_done_callback(_finished)

    return handle


def nouns(ctx: NounsPorts, jobs: Jobs) -> list[Noun]:
    """Every noun whose verbs the api answers (registry.served checks them against the contract)."""
    return [jobs, Runs(ctx), Dlq(ctx, jobs.admission), Agents(ctx), Cluster(ctx), Tenants(ctx), Secrets(ctx),
            Submissions(ctx), Notifications(ctx), Tokens(ctx), Calendars(ctx)]


async def main(ctx: Context) -> None:
    jobs = Jobs(ctx, Admission(ctx))
    verbs = served(nouns(ctx, jobs))
    intake = Intake(ctx, jobs)
    endpoints: list[Endpoint] = []
    for verb, op in verbs.items():
        for_tenants, for_admin = s.api_endpoint(verb)
        name = verb.replace(".", "_")
        endpoints += [(name, for_tenants, endpoint(verb, op)), (f"{name}_admin", for_admin, endpoint(verb, op))]
    # The server has every endpoint's subscription before this says ready (a request sent on "api ready" must
    # not find no responders).
    service = await ctx.rpc.endpoints(name=s.API_SERVICE, version=__version__, queue=s.API_QUEUE,
                                      description="jetcron job scheduler API", endpoints=endpoints)
    mint = await serve_mint(ctx)
    await serve_room(ctx)
    intake_loop = background(ctx, intake.serve())
    edges = background(ctx, jobs.dependents.backfill())
    await ctx.rpc.flush()
    ctx.ready.set()
    ctx.log.info("api ready", verbs=len(verbs), run_credentials=mint is not None)
    await ctx.stop.wait()
    await service.stop()
    edges.cancel()
    await intake_loop

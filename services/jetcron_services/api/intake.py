"""The intake: job requests services publish to JetStream (`jc.submit.<tenant>`), settled once each.

A request is durable once JetStream acks its publish; the api takes it from the durable consumer `api_intake`,
creates the job exactly as `jobs.create` would, and keeps the outcome under the request id (its Nats-Msg-Id)
in jc_submissions, where `submissions.get` (submissions.py) answers it. A request that fails validation is
rejected once, with the field named, and acked: never redelivered. Only a store that is away makes it wait and come
again.
"""

from __future__ import annotations

import re

import msgspec

from jetcron.bus.consume import Retry
from jetcron.bus.ports import Message, Records
from jetcron.core.errors import InvalidSpec, JetcronError
from jetcron.core.validate import parse_json_object
from jetcron.wire import subjects as s
from jetcron.wire.api import error_reply
from jetcron.wire.messages import Submission
from jetcron_services.api.call import Call
from jetcron_services.api.jobs import Jobs
from jetcron_services.api.ports import IntakePorts

REQUEST_ID_RE = re.compile(r"^[A-Za-z0-9_-]{1,100}$")
MAX_DELIVERIES = 5
"""A request that fails for a reason other than a store being away (a bug) is rejected after this many tries,
not redelivered for ever."""


def submission_key(tenant: str, request_id: str) -> str:
    return f"{tenant}.{request_id}"


class Intake:
    def __init__(self, ctx: IntakePorts, jobs: Jobs) -> None:
        self.ctx = ctx
        self.jobs = jobs
        self.outcomes: Records[Submission] | None = None

    async def _store(self) -> Records[Submission]:
        if self.outcomes is None:
            self.outcomes = await self.ctx.buckets.open(s.BUCKET_SUBMISSIONS, Submission)
        return self.outcomes

    async def serve(self) -> None:
        await self.ctx.consumers.consume(s.STREAM_SUBMIT, s.CONSUMER_INTAKE, self.handle, batch=64, concurrency=32,
                                         stop=self.ctx.stop)

    async def handle(self, msg: Message) -> None:
        tenant = s.parse_submit_subject(msg.subject)
        header = (msg.headers or {}).get("Nats-Msg-Id")
        request_id = header or f"seq-{msg.metadata.sequence.stream}"
        store = await self._store()
        if not REQUEST_ID_RE.fullmatch(request_id):
            # Kept under the stream sequence, the one id it surely has: the publisher reads it from its ack.
            request_id = f"seq-{msg.metadata.sequence.stream}"
            await self._keep(store, tenant, request_id, InvalidSpec(
                "Nats-Msg-Id", header, "must be 1-100 letters, digits, '-' or '_' (it names the request's outcome)"))
            return
        if await store.maybe(submission_key(tenant, request_id)) is not None:
            return  # settled already (this is a redelivery, or a repeat after the stream forgot the id)
        try:
            record = await self.jobs.create(Call(self._with_key(msg.data, request_id), tenant))
        except JetcronError as exc:
            if exc.retryable:
                raise Retry(1.0, f"intake request {request_id}: {exc}") from exc
            await self._keep(store, tenant, request_id, exc)
            return
        except Exception as exc:
            if msg.metadata.num_delivered < MAX_DELIVERIES:
                raise
            await self._keep(store, tenant, request_id, exc)
            return
        await store.put(submission_key(tenant, request_id), Submission(
            request_id=request_id, tenant=tenant, outcome="created", job=record.spec.name, version=record.version,
            at=self.ctx.clock.now()))

    def _with_key(self, data: bytes, request_id: str) -> bytes:
        """The request as jobs.create takes it; without its own idempotency key, the request id is one, so a
        redelivery after a crash finds the job it made rather than a conflict."""
        parsed = parse_json_object(data or b"{}")  # as jobs.create reads an empty body: no spec, named so
        if "idempotency_key" not in parsed:
            parsed["idempotency_key"] = f"submit-{request_id}"
        return msgspec.json.encode(parsed)

    async def _keep(self, store: Records[Submission], tenant: str, request_id: str, exc: Exception) -> None:
        reply = error_reply(exc)
        await store.put(submission_key(tenant, request_id), Submission(
            request_id=request_id, tenant=tenant, outcome="rejected", error=reply.error, at=self.ctx.clock.now()))
        self.ctx.log.info("intake request rejected", tenant=tenant, request_id=request_id,
                          code=reply.error.code if reply.error else "", field=getattr(exc, "field", None))

"""Submission verbs: the outcome of a job request published to the intake (intake.py), by its request id."""

from __future__ import annotations

from typing import Any

from jetcron.bus.ports import Records
from jetcron.core.errors import InvalidSpec, NotFound
from jetcron.wire import subjects as s
from jetcron.wire import verbs as v
from jetcron.wire.messages import Submission
from jetcron_services.api.call import Call
from jetcron_services.api.intake import REQUEST_ID_RE, submission_key
from jetcron_services.api.ports import SubmissionsPorts
from jetcron_services.api.registry import Noun, verb
from jetcron_services.api.requests import body, text


class Submissions(Noun):
    noun = "submissions"

    def __init__(self, ctx: SubmissionsPorts) -> None:
        self.ctx = ctx
        self.outcomes: Records[Submission] | None = None

    async def _store(self) -> Records[Submission]:
        if self.outcomes is None:
            self.outcomes = await self.ctx.buckets.open(s.BUCKET_SUBMISSIONS, Submission)
        return self.outcomes

    @verb
    async def get(self, call: Call) -> Submission:
        """A request's outcome; a tenant reads its own only (another's reads as not found)."""
        req: dict[str, Any] = body(call.data, v.SubmissionsGet)
        request_id = text(req, "request_id", limit=100)
        if request_id is None or not REQUEST_ID_RE.fullmatch(request_id):
            raise InvalidSpec("request_id", request_id, "must be 1-100 letters, digits, '-' or '_'")
        tenant = call.tenant if call.tenant is not None else text(req, "tenant") or "default"
        found = await (await self._store()).maybe(submission_key(tenant, request_id))
        if found is None:
            raise NotFound("submission", request_id)
        return found[0]

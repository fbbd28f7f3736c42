"""Notification verbs: a job's delivery log, and a parked delivery tried again. A tenant names its own jobs and
deliveries; another tenant's read exactly like missing ones."""

from __future__ import annotations

import asyncio

from jetcron.bus.ports import Records
from jetcron.core.errors import Conflict, InvalidSpec, NotFound
from jetcron.core.lifecycle.notify import DELIVERED, DELIVERY_ID_RE, PARKED, PENDING, Delivery, job_deliveries
from jetcron.wire import subjects as s
from jetcron.wire import verbs as v
from jetcron.wire.api import Page
from jetcron.wire.messages import Redeliver
from jetcron_services.api.call import Call, job_named, visible
from jetcron_services.api.ports import NotificationsPorts
from jetcron_services.api.registry import Noun, verb
from jetcron_services.api.requests import body, integer, text

STATES = (PENDING, DELIVERED, PARKED)


class Notifications(Noun):
    noun = "notifications"

    def __init__(self, ctx: NotificationsPorts) -> None:
        self.ctx = ctx
        self.store: Records[Delivery] | None = None

    async def _log(self) -> Records[Delivery]:
        if self.store is None:
            self.store = await self.ctx.buckets.open(s.BUCKET_NOTIFY, Delivery)
        return self.store

    @verb
    async def list(self, call: Call) -> Page[Delivery]:
        req = body(call.data, v.NotificationsList)
        job = text(req, "job")
        key = job_named(job, call.tenant, "job")  # another tenant's job reads as a missing one
        state = text(req, "state")
        if state is not None and state not in STATES:
            raise InvalidSpec("state", state, f"must be one of {', '.join(STATES)}")
        limit = integer(req, "limit", 100, 1, 1000)
        cursor = text(req, "cursor", limit=400) or ""
        log = await self._log()
        keys = sorted(k for k in await log.keys(job_deliveries(key)) if k > cursor)
        items: list[Delivery] = []
        next_cursor = None
        for start in range(0, len(keys), limit):
            chunk = keys[start:start + limit]
            found = await asyncio.gather(*(log.maybe(k) for k in chunk))
            for got in found:
                if got is None or (state is not None and got[0].state != state):
                    continue
                if len(items) == limit:
                    next_cursor = items[-1].delivery_id
                    return Page(items=items, next_cursor=next_cursor)
                items.append(got[0])
        return Page(items=items, next_cursor=next_cursor)

    @verb
    async def redeliver(self, call: Call) -> Delivery:
        req = body(call.data, v.NotificationsRedeliver)
        delivery_id = text(req, "delivery_id", limit=400)
        if delivery_id is None or not DELIVERY_ID_RE.fullmatch(delivery_id):
            raise InvalidSpec("delivery_id", delivery_id, "is not a delivery id (`notifications list` shows them)")
        found = await (await self._log()).maybe(delivery_id)
        if found is None or not visible(found[0].notice.tenant, call.tenant):
            raise NotFound("delivery", delivery_id)
        record = found[0]
        if record.state != PARKED:
            raise Conflict(f"delivery {delivery_id} is {record.state}: only a parked delivery is tried again")
        tenant = record.notice.tenant
        # One request per parked spell: a repeated click before the notifier took it is the same message.
        await self.ctx.publisher.publish(s.redeliver_subject(tenant),
                                         Redeliver(delivery_id=delivery_id, tenant=tenant, at=self.ctx.clock.now()),
                                         msg_id=f"redeliver-{delivery_id}-{len(record.attempts)}")
        return record

"""Agent verbs (admin only): the live agents, a page at a time."""

from __future__ import annotations

from jetcron.core.models import AgentInfo
from jetcron.wire import verbs as v
from jetcron.wire.api import Page
from jetcron_services.api.call import Call
from jetcron_services.api.ports import AgentsPorts
from jetcron_services.api.registry import Noun, verb
from jetcron_services.api.requests import body, integer, text


class Agents(Noun):
    noun = "agents"

    def __init__(self, ctx: AgentsPorts) -> None:
        self.ctx = ctx

    @verb
    async def list(self, call: Call) -> Page[AgentInfo]:
        """By agent id, `limit` at a time: at 10,000 agents a whole listing is 10,000 reads, which no page should
        wait for (the keys are one listing; only the page's records are read, concurrently)."""
        req = body(call.data, v.AgentsList)
        limit = integer(req, "limit", 100, 1, 1000)
        after = text(req, "cursor") or ""
        ids = sorted(k for k in await self.ctx.agents.keys() if k > after)
        items, cursor = await self.ctx.agents.page(ids, limit, lambda _: True)
        return Page(items=items, next_cursor=cursor)

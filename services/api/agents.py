"""Agent verbs (admin only): the live agents."""

from __future__ import annotations

from jetcron.core.models import AgentInfo
from jetcron.services.api.call import Call
from jetcron.services.api.registry import Noun, verb
from jetcron.services.api.requests import body
from jetcron.services.runtime import Context
from jetcron.wire import verbs as v
from jetcron.wire.api import Page


class Agents(Noun):
    noun = "agents"

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    @verb
    async def list(self, call: Call) -> Page[AgentInfo]:
        body(call.data, v.Empty)
        items: list[AgentInfo] = []
        for key in sorted(await self.ctx.agents.keys()):
            found = await self.ctx.agents.maybe(key)
            if found is not None:
                items.append(found[0])
        return Page(items=items)

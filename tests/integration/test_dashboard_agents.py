"""The agents page and the REST listing a page at a time: at 10,000 agents a whole listing is 10,000 reads, so each
page reads only its own; the overview counts the agents without reading any. Through the real gateway, api and
server; the agents registered as their heartbeats write them."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

import nats
from harness import mint
from rest_support import Rest
from test_dashboard_calendars import log_in

from jetcron.auth.authority import Authority
from jetcron.auth.roles import Role
from jetcron.bus.connect import Identity
from jetcron.core.models import AgentInfo
from jetcron.wire import subjects as s
from jetcron.wire.codec import encode

REGISTERED = 54
"""Beside the system's own agent-1: 55 agents, one more than the page's 50 and a few."""


async def _register(rest: Rest, authority: Authority, tmp_path: Path) -> list[str]:
    """Each agent writes its own entry with its own credential (no other may), as its heartbeat would."""
    now = datetime.now(UTC)
    ids = [f"fleet-{i:03d}" for i in range(REGISTERED)]
    for agent_id in reversed(ids):  # stored out of order: the listing sorts
        info = AgentInfo(agent_id=agent_id, cpu=4, memory_mb=4096, heartbeat_at=now, started_at=now)
        creds = mint(authority, tmp_path / f"{agent_id}.creds", Role.AGENT, agent_id=agent_id)
        nc = await nats.connect(rest.admin.nc.connected_url.geturl(), **Identity(creds=creds).options())
        try:
            await nc.jetstream().publish(s.kv_subject(s.BUCKET_AGENTS, agent_id), encode(info))
        finally:
            await nc.close()
    return sorted(["agent-1", *ids])


def _shown(html: str) -> list[str]:
    return re.findall(r"<tr><td>([\w-]+)<br>", html)


async def test_the_agents_page_shows_fifty_agents_a_page_and_the_overview_counts_them_all(
        rest: Rest, authority: Authority, tmp_path: Path) -> None:
    every = await _register(rest, authority, tmp_path)
    async with rest.http(None) as http:
        await log_in(http, await rest.token(None))

        first = await http.get("/ui/agents")
        assert first.status_code == 200, first.text[:500]
        assert _shown(first.text) == every[:50]
        link = re.search(r'<a rel="next" href="(/ui/agents\?cursor=[^"]+)">', first.text)
        assert link is not None and link.group(1) == f"/ui/agents?cursor={every[49]}"

        second = await http.get(link.group(1))
        assert _shown(second.text) == every[50:]
        assert 'rel="next"' not in second.text

        overview = await http.get("/ui")
        assert re.search(r'Agents alive</h2>\s*<p class="big"><a href="/ui/agents">55</a>', overview.text), \
            overview.text[:2000]


async def test_rest_pages_agents_for_the_admin_only_and_names_a_bad_limit(
        rest: Rest, authority: Authority, tmp_path: Path) -> None:
    every = await _register(rest, authority, tmp_path)
    async with rest.http(await rest.token(None)) as admin:
        seen, cursor = [], None
        while True:
            page = (await admin.get("/api/v1/agents", params={"limit": 20} | ({"cursor": cursor} if cursor else {})))
            assert page.status_code == 200, page.text
            body = page.json()
            assert len(body["items"]) <= 20
            seen += [a["agent_id"] for a in body["items"]]
            if not (cursor := body["next_cursor"]):
                break
        assert seen == every

        bad = await admin.get("/api/v1/agents", params={"limit": 0})
        assert (bad.status_code, bad.json()["code"], bad.json()["field"]) == (422, "invalid", "limit"), bad.text
        assert bad.json()["detail"] == "Expected `int` >= 1"

    async with rest.http(await rest.token("acme")) as tenant:
        refused = await tenant.get("/api/v1/agents", params={"limit": 5})
        assert refused.status_code == 403 and refused.json()["code"] == "forbidden"

"""Moving a waiting run through the gateway's two doors, REST and the dashboard, with real tokens: the tenant moves
its own run within its policy's ceiling, another tenant's run reads as missing, and the dashboard's form needs its
session and CSRF token like every other action."""

from __future__ import annotations

import re
from typing import Any

from harness import wait_for
from rest_support import Rest

from jetcron.sdk.client import Client


async def _waiting(client: Client, name: str) -> str:
    """A run of a new job that no agent can take (it asks for a label none has), so it waits."""
    await client.call("jobs.create", {"spec": {"name": name, "command": ["true"], "priority": "low",
                                               "require": {"zone": "nowhere"}}})

    async def scheduled() -> str | None:
        items: list[dict[str, Any]] = (await client.call("runs.list", {"job": name}))["items"]
        return next((r["run_id"] for r in items if r["state"] == "scheduled"), None)

    found: str = await wait_for(scheduled, 30, what=f"{name}'s run to wait")
    return found


async def _priority(client: Client, run_id: str) -> str:
    return str((await client.call("runs.get", {"run_id": run_id}))["spec"]["priority"])


async def test_a_waiting_run_moves_through_rest_and_the_dashboard_within_its_tenant(rest: Rest) -> None:
    acme, globex = Client(rest.admin.nc, tenant="acme"), Client(rest.admin.nc, tenant="globex")
    await rest.admin.tenants.set("acme", max_priority="high")  # type: ignore[arg-type]
    mine, theirs = await _waiting(acme, "mine"), await _waiting(globex, "theirs")
    token = await rest.token("acme")

    async with rest.http(token) as http:
        # REST: acme moves its own run within its ceiling
        moved = await http.post(f"/api/v1/runs/{mine}/priority", json={"priority": "high"})
        assert (moved.status_code, moved.json()["spec"]["priority"]) == (200, "high"), moved.text
        # above it: refused, naming the ceiling, and nothing changes
        above = await http.post(f"/api/v1/runs/{mine}/priority", json={"priority": "critical"})
        assert above.status_code == 403 and "may use priorities up to high" in above.json()["detail"], above.text
        assert await _priority(acme, mine) == "high"
        # another tenant's run reads as missing, and stays as it was
        foreign = await http.post(f"/api/v1/runs/{theirs}/priority", json={"priority": "high"})
        assert foreign.status_code == 404, foreign.text
        assert await _priority(globex, theirs) == "low"
        # a priority that is none is a 422 naming the field
        unknown = await http.post(f"/api/v1/runs/{mine}/priority", json={"priority": "urgent"})
        assert unknown.status_code == 422 and unknown.json()["field"] == "priority", unknown.text

    async with rest.http(None) as http:
        # The dashboard: logged in as acme, its run's page carries the form's CSRF token
        login = await http.post("/ui/login", data={"token": token, "next": "/ui/jobs"}, follow_redirects=False)
        assert login.status_code == 303
        page = await http.get(f"/ui/runs/{mine}")
        csrf = re.search(r'name="csrf" value="([0-9a-f]{64})"', page.text)
        assert page.status_code == 200 and csrf, page.text[:500]
        # without the token nothing moves
        refused = await http.post(f"/ui/runs/{mine}/priority", data={"priority": "low"}, follow_redirects=False)
        assert refused.status_code == 403 and await _priority(acme, mine) == "high"
        # with it, the run moves back to low
        done = await http.post(f"/ui/runs/{mine}/priority", data={"csrf": csrf.group(1), "priority": "low"},
                               follow_redirects=False)
        assert done.status_code == 303 and done.headers["location"].startswith(f"/ui/runs/{mine}"), done.text
        assert await _priority(acme, mine) == "low"
        # and globex's run is not acme's to move from here either
        await http.post(f"/ui/runs/{theirs}/priority", data={"csrf": csrf.group(1), "priority": "high"})
        assert await _priority(globex, theirs) == "low"

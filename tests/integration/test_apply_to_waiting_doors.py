"""A job's new priority reaching its waiting runs through the gateway's two doors, REST
(`PATCH /api/v1/jobs/{id}?apply_to_waiting=true`) and the dashboard's job form (its "apply to waiting" checkbox),
with a tenant's real token: the runs move only when asked, and each move is on the audit trail naming the tenant."""

from __future__ import annotations

import json
import re

import httpx
import nats
from rest_support import Rest
from test_reprioritize_doors import _priority as _run_priority
from test_reprioritize_doors import _waiting

from jetcron.sdk.client import Client
from jetcron.wire import subjects as s


async def _moves(client: Client) -> list[tuple[object, ...]]:
    """Every `reprioritized` event on the audit trail, read with the admin's credential (it reads every stream)."""
    sub = await client.nc.jetstream().subscribe(s.event_subject("reprioritized", "api"), ordered_consumer=True)
    found: list[tuple[object, ...]] = []
    try:
        while True:
            try:
                msg = await sub.next_msg(timeout=1)
            except (TimeoutError, nats.errors.TimeoutError):
                return found
            event = json.loads(msg.data)
            found.append((event["run_id"], event["priority_from"], event["priority_to"], event["by"]))
    finally:
        await sub.unsubscribe()


async def _patch(http: httpx.AsyncClient, job: str, priority: str, version: int, **params: str) -> httpx.Response:
    return await http.patch(f"/api/v1/jobs/{job}", json={"priority": priority}, params=params,
                            headers={"If-Match": f'"{version}"'})


def _edit_form(page: httpx.Response) -> tuple[str, str]:
    """The job page's CSRF token and the version its edit form names (the form saves only at that version)."""
    csrf = re.search(r'name="csrf" value="([0-9a-f]{64})"', page.text)
    version = re.search(r'name="version" value="(\d+)"', page.text)
    assert page.status_code == 200 and csrf and version, page.text[:500]
    assert 'name="apply_to_waiting" value="1"' in page.text  # the checkbox the form posts
    return csrf.group(1), version.group(1)


async def test_a_jobs_new_priority_moves_its_waiting_runs_only_when_asked_through_rest_and_the_dashboard(
        rest: Rest) -> None:
    acme = Client(rest.admin.nc, tenant="acme")
    run = await _waiting(acme, "mine")
    token = await rest.token("acme")

    async with rest.http(token) as http:
        # REST without the flag: the job's spec changes, its waiting run keeps the priority it was placed with
        plain = await _patch(http, "mine", "normal", 1)
        assert (plain.status_code, plain.json()["spec"]["priority"], plain.json()["version"]) == (200, "normal", 2)
        assert await _run_priority(acme, run) == "low"
        # an explicit false is the same as none
        declined = await _patch(http, "mine", "normal", 2, apply_to_waiting="false")
        assert declined.status_code == 200, declined.text
        assert await _run_priority(acme, run) == "low"
        # with it, the waiting run moves to the job's new priority
        applied = await _patch(http, "mine", "high", 3, apply_to_waiting="true")
        assert (applied.status_code, applied.json()["spec"]["priority"]) == (200, "high"), applied.text
        assert await _run_priority(acme, run) == "high"

    async with rest.http(None) as http:
        login = await http.post("/ui/login", data={"token": token, "next": "/ui/jobs"}, follow_redirects=False)
        assert login.status_code == 303
        csrf, version = _edit_form(await http.get("/ui/jobs/mine"))
        assert version == "4"
        form = {"command": "true", "schedule_kind": "now", "queue": "default"}
        # The dashboard's form without the checkbox: the job moves to normal, its waiting run stays high
        saved = await http.post("/ui/jobs/mine/edit", data={**form, "csrf": csrf, "version": version,
                                                            "priority": "normal"}, follow_redirects=False)
        assert (saved.status_code, saved.headers["location"]) == (303, "/ui/jobs/mine?done=saved"), saved.text
        assert await _run_priority(acme, run) == "high"
        csrf, version = _edit_form(await http.get("/ui/jobs/mine"))
        assert version == "5"
        # with the checkbox but without the CSRF token: refused, nothing changes
        refused = await http.post("/ui/jobs/mine/edit", data={**form, "version": version, "priority": "low",
                                                              "apply_to_waiting": "1"}, follow_redirects=False)
        assert refused.status_code == 403
        assert await _run_priority(acme, run) == "high"
        # with the checkbox and the token: the waiting run moves with the job, to low
        moved = await http.post("/ui/jobs/mine/edit", data={**form, "csrf": csrf, "version": version,
                                                            "priority": "low", "apply_to_waiting": "1"},
                                follow_redirects=False)
        assert (moved.status_code, moved.headers["location"]) == (303, "/ui/jobs/mine?done=saved"), moved.text
        assert await _run_priority(acme, run) == "low"

    spec = (await acme.jobs.get("mine", count=0)).job
    assert (spec.version, spec.spec.priority) == (6, "low")
    # Each move, and only those two, is on the audit trail, naming the tenant that asked
    assert await _moves(rest.admin) == [(run, "low", "high", "tenant:acme"), (run, "high", "low", "tenant:acme")]

"""The REST API through a real uvicorn (the gateway process) on a real nats-server with auth on."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from harness import wait_for
from rest_support import Rest

from jetcron.sdk.client import ApiError, Client
from jetcron_services.gateway import contract


async def _job_when(http: httpx.AsyncClient, job_id: str, states: set[str]) -> dict[str, Any]:
    async def reached() -> dict[str, Any] | None:
        got = await http.get(f"/api/v1/jobs/{job_id}")
        assert got.status_code == 200, got.text
        body: dict[str, Any] = got.json()
        return body if body["state"] in states else None

    result: dict[str, Any] = await wait_for(reached, 30, what=f"job {job_id} to reach {states}")
    return result


def _problem(response: httpx.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/problem+json"), response.headers
    body: dict[str, Any] = response.json()
    assert body["status"] == status and body["title"] and body["detail"], body
    return body


async def test_the_designs_four_calls_end_to_end(rest: Rest) -> None:
    async with rest.http(await rest.token("acme")) as http:
        # POST /api/v1/jobs with the design's body (a shell string, no schedule: now)
        created = await http.post("/api/v1/jobs", json={
            "name": "hello", "command": "echo hello from rest", "resources": {"cpu": 0.1, "memory_gb": 0.0625},
            "priority": "high", "queue": "reports", "retry_policy": {"max_retries": 3, "backoff": "exponential"},
            "depends_on": [], "timeout_seconds": 60})
        assert created.status_code == 201, created.text
        assert created.json() == {"job_id": "hello", "status": "queued", "warnings": []}

        # GET /api/v1/jobs/{job_id}: the latest run's state, machine, start and logs
        job = await _job_when(http, "hello", {"succeeded", "failed", "dead"})
        assert (job["status"], job["state"]) == ("completed", "succeeded"), job  # the design's word, jetcron's
        assert job["machine_id"] == "agent-1" and job["attempts"] == 1, job
        assert job["started_at"] and job["queue"] == "reports", job
        assert job["logs_url"] == f"{rest.url}/api/v1/runs/{job['run_id']}/logs"  # absolute, as the request came
        logs = await http.get(job["logs_url"])
        assert logs.status_code == 200 and logs.text == "hello from rest\n", logs.text

        # GET /api/v1/jobs?queue=&status=
        listed = (await http.get("/api/v1/jobs", params={"queue": "reports", "status": "succeeded"})).json()
        assert [j["job_id"] for j in listed["items"]] == ["hello"] and listed["next_cursor"] is None
        assert (await http.get("/api/v1/jobs", params={"queue": "other"})).json()["items"] == []

        # POST /api/v1/jobs/{job_id}/cancel: its unfinished run is cancelled
        assert (await http.post("/api/v1/jobs", json={"name": "slow", "command": ["sleep", "60"]})).status_code == 201
        await _job_when(http, "slow", {"running"})
        cancelled = await http.post("/api/v1/jobs/slow/cancel")
        assert cancelled.status_code == 200 and len(cancelled.json()["cancelled"]) == 1, cancelled.text
        assert (await _job_when(http, "slow", {"cancelled"}))["status"] == "cancelled"


async def test_every_route_needs_a_valid_token_and_a_tenant_sees_only_its_own(rest: Rest) -> None:
    acme, globex = await rest.token("acme"), await rest.token("globex")
    async with rest.http(acme) as a, rest.http(globex) as g, rest.http(None) as anonymous:
        assert (await a.post("/api/v1/jobs", json={"name": "mine", "command": "true",
                                                   "schedule": "0 0 1 1 *"})).status_code == 201
        # Without a token, a malformed one or a made-up one: 401, and a Bearer challenge
        for client, headers in ((anonymous, {}), (anonymous, {"Authorization": "Bearer nope"}),
                                (anonymous, {"Authorization": "Bearer jct_0123456789abcdef_" + "x" * 43})):
            refused = await client.get("/api/v1/jobs/mine", headers=headers)
            assert _problem(refused, 401)["code"] == "unauthorized"
            assert refused.headers["www-authenticate"].startswith("Bearer")
        # Another tenant's job reads exactly like a missing one
        theirs, missing = await g.get("/api/v1/jobs/mine"), await g.get("/api/v1/jobs/nothing-here")
        assert _problem(theirs, 404)["detail"].replace("mine", "X") == \
            _problem(missing, 404)["detail"].replace("nothing-here", "X")
        assert _problem(await g.post("/api/v1/jobs/mine/cancel"), 404)["code"] == "not_found"
        assert (await g.get("/api/v1/jobs")).json()["items"] == []
        # Notification deliveries: a job's own log; an id no delivery can have is 404 naming the path parameter,
        # before it reaches a key (`.01-2` is one the store refuses as a key)
        assert (await a.get("/api/v1/jobs/mine/notifications")).json() == {"items": [], "next_cursor": None}
        for made_up in ("not%20an%20id", ".01-2"):
            assert _problem(await a.post(f"/api/v1/notifications/{made_up}/redeliver"), 404)["field"] == \
                "delivery_id"
        assert _problem(await g.post("/api/v1/notifications/mine.20261203T100000000Z.dead-0-0/redeliver"),
                        404)["code"] == "not_found"
        # Admin routes are the admin's
        assert _problem(await a.get("/api/v1/agents"), 403)["code"] == "forbidden"
        assert _problem(await a.get("/api/v1/cluster"), 403)["code"] == "forbidden"
        async with rest.http(await rest.token(None)) as admin:
            assert [x["agent_id"] for x in (await admin.get("/api/v1/agents")).json()["items"]] == ["agent-1"]
            cluster = (await admin.get("/api/v1/cluster")).json()
            assert cluster["placement_leader"].startswith("placement-") and cluster["trigger_shards"] == 16
            assert set(cluster["queue_depth"]) == {"critical", "high", "normal", "low"}

        # Revoked: refused from then on, without a restart
        token_id = acme.split("_")[1]
        assert (await rest.admin.call("tokens.revoke", {"token_id": token_id}))["revoked"] is True

        async def refused() -> bool:
            return (await a.get("/api/v1/jobs/mine")).status_code == 401

        await wait_for(refused, 10, what="the revoked token to be refused")


async def test_bad_input_is_a_problem_naming_the_field_and_stores_nothing(rest: Rest) -> None:
    async with rest.http(await rest.token("acme")) as http:
        cases = [
            ({"name": "a", "command": "true", "resources": {"cpu": "lots"}}, 422, "resources.cpu"),
            ({"name": "a", "command": "true", "colour": "red"}, 422, "colour"),
            ({"name": "a", "command": "true", "schedule": "61 * * * *"}, 422, "schedule"),
            ({"name": "a", "command": "true", "timezone": "Mars/Olympus", "schedule": "0 * * * *"}, 422, "timezone"),
            ({"name": "bad name!", "command": "true"}, 422, "name"),
            ({"name": "a", "command": "true", "retry_policy": {"max_retries": -5}}, 422, "retry_policy.max_retries"),
            ({"name": "a", "command": "true", "resources": {"cpu": 10**30}}, 422, "resources.cpu"),
            ({"name": "a", "command": "true", "queue": "no.dots"}, 422, "queue"),
            ({"name": "a", "command": "true", "notify": [{"on": ["dead"], "webhook": "ftp://example.com/x"}]}, 422,
             "notify[0].webhook"),
            ({"name": "a", "command": "true", "notify": [{"on": ["dead"], "webhook": "http://127.0.0.1:9/x"}]}, 422,
             "notify[0].webhook"),
            ({"name": "a", "command": "true", "notify": [{"on": ["exploded"], "webhook": "https://example.com"}]},
             422, "notify[0].on[0]"),
            ({"name": "a", "command": "true", "schedule": "*/5 * * * *", "start_deadline_seconds": 600}, 422,
             "start_deadline_seconds"),
        ]
        for body, status, field in cases:
            assert _problem(await http.post("/api/v1/jobs", json=body), status)["field"] == field, body
        malformed = await http.post("/api/v1/jobs", content=b'{"name": "a",',
                                    headers={"content-type": "application/json"})
        assert _problem(malformed, 400)["code"] == "invalid"
        too_big = await http.post("/api/v1/jobs", content=b'{"name":"' + b"a" * (2 * 1024 * 1024) + b'"}',
                                  headers={"content-type": "application/json"})
        _problem(too_big, 413)
        for raw in (b'{"name": "a", "command": "\\ud800"}', b'{"name": "\xff\xfe", "command": "true"}',
                    b'{"name": "a", "command": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"):
            odd = await http.post("/api/v1/jobs", content=raw, headers={"content-type": "application/json"})
            assert odd.status_code in (400, 422), (raw[:40], odd.status_code, odd.text)
            assert _problem(odd, odd.status_code)["code"] == "invalid"
        _problem(await http.get("/api/v1/nowhere"), 404)
        _problem(await http.put("/api/v1/jobs"), 405)
        assert (await http.get("/api/v1/jobs")).json()["items"] == []
    assert (await rest.admin.call("jobs.list"))["items"] == []


async def test_idempotency_key_makes_a_retried_create_one_job(rest: Rest) -> None:
    async with rest.http(await rest.token("acme")) as http:
        body = {"name": "once", "command": "true", "schedule": "0 0 1 1 *"}
        first = await http.post("/api/v1/jobs", json=body, headers={"Idempotency-Key": "k-1"})
        again = await http.post("/api/v1/jobs", json=body, headers={"Idempotency-Key": "k-1"})
        assert (first.status_code, again.status_code) == (201, 201) and first.json() == again.json()
        other = await http.post("/api/v1/jobs", json={**body, "command": "false"}, headers={"Idempotency-Key": "k-1"})
        assert _problem(other, 409)["code"] == "conflict"
        without_key = await http.post("/api/v1/jobs", json=body)
        assert "already exists" in _problem(without_key, 409)["detail"]
    assert [j["spec"]["name"] for j in (await rest.admin.call("jobs.list"))["items"]] == ["once"]


async def test_openapi_lists_every_route_and_docs_render(rest: Rest) -> None:
    async with rest.http(None) as http:
        spec = (await http.get("/api/v1/openapi.json")).json()
        docs = await http.get("/api/v1/docs", follow_redirects=True)
        health = [await http.get(path) for path in ("/livez", "/readyz")]
    assert [(r.status_code, r.text) for r in health] == [(200, "ok"), (200, "ready")]
    assert spec["openapi"].startswith("3.1") and docs.status_code == 200 and "<html" in docs.text.lower()
    routes = {(path, method) for path, item in spec["paths"].items() for method in item}
    assert {("/api/v1/jobs", "post"), ("/api/v1/jobs", "get"), ("/api/v1/jobs/{job_id}", "get"),
            ("/api/v1/jobs/{job_id}/cancel", "post"), ("/api/v1/jobs/{job_id}", "delete"),
            ("/api/v1/jobs/{job_id}/pause", "post"), ("/api/v1/jobs/{job_id}/resume", "post"),
            ("/api/v1/jobs/{job_id}/trigger", "post"), ("/api/v1/runs", "get"), ("/api/v1/runs/{run_id}", "get"),
            ("/api/v1/runs/{run_id}/cancel", "post"), ("/api/v1/runs/{run_id}/logs", "get"),
            ("/api/v1/agents", "get"), ("/api/v1/jobs/{job_id}", "patch"), ("/api/v1/jobs/{job_id}/spec", "get"),
            ("/api/v1/jobs/{job_id}/backfill", "post"), ("/api/v1/schedule/preview", "get"), ("/api/v1/dlq", "get"),
            ("/api/v1/dlq/{run_id}/replay", "post"), ("/api/v1/tenants", "get"),
            ("/api/v1/tenants/{tenant}", "put"), ("/api/v1/jobs/{job_id}/notifications", "get"),
            ("/api/v1/notifications/{delivery_id}/redeliver", "post"), ("/api/v1/cluster", "get")} <= routes
    # and exactly the contract's operations (the calendars', a run's priority and the rest it adds)
    assert routes == {(op.path, op.method) for op in contract.OPS}
    create = spec["paths"]["/api/v1/jobs"]["post"]
    assert "201" in create["responses"] and create["requestBody"]


async def test_following_logs_streams_until_the_run_ends(rest: Rest) -> None:
    async with rest.http(await rest.token("acme")) as http:
        script = "for i in 1 2 3; do echo line $i; sleep 0.3; done"
        assert (await http.post("/api/v1/jobs", json={"name": "talker", "command": script})).status_code == 201
        job = await _job_when(http, "talker", {"running", "succeeded"})
        chunks = []
        async with http.stream("GET", job["logs_url"], params={"follow": "1"}) as streamed:
            assert streamed.status_code == 200
            async for chunk in streamed.aiter_text():
                chunks.append(chunk)
        assert "".join(chunks) == "line 1\nline 2\nline 3\n"
        assert (await http.get("/api/v1/jobs/talker")).json()["status"] == "completed"


async def test_cursor_pagination_over_1000_jobs_has_no_gap_and_no_duplicate(rest: Rest) -> None:
    async with rest.http(await rest.token("acme")) as http:
        names = [f"job-{i:04d}" for i in range(1000)]

        async def create(name: str) -> None:
            made = await http.post("/api/v1/jobs", json={"name": name, "command": "true", "schedule": "0 0 1 1 *"})
            assert made.status_code == 201, made.text

        for i in range(0, len(names), 50):
            await asyncio.gather(*(create(n) for n in names[i:i + 50]))
        seen: list[str] = []
        cursor: str | None = None
        while True:
            page = (await http.get("/api/v1/jobs", params={"limit": 200, **({"cursor": cursor} if cursor else {})}))
            assert page.status_code == 200, page.text
            seen += [j["job_id"] for j in page.json()["items"]]
            cursor = page.json()["next_cursor"]
            if cursor is None:
                break
    assert seen == names


async def test_api_error_codes_map_to_http_statuses(rest: Rest) -> None:
    with pytest.raises(ApiError) as denied:
        await Client(rest.admin.nc, tenant="acme").call("tokens.create", {"admin": True})
    assert denied.value.code == "forbidden"
    with pytest.raises(ApiError) as invalid:
        await rest.admin.call("tokens.create", {"tenant": "acme", "admin": True})
    assert invalid.value.field == "tenant"


async def test_patch_needs_the_version_read_and_refuses_a_stale_one(rest: Rest) -> None:
    async with rest.http(await rest.token("acme")) as http:
        assert (await http.post("/api/v1/jobs", json={"name": "etl", "command": "true",
                                                      "schedule": "0 3 * * *"})).status_code == 201
        read = await http.get("/api/v1/jobs/etl/spec")
        assert read.status_code == 200 and read.headers["etag"] == '"1"' and read.json()["version"] == 1
        assert len(read.json()["next_fires"]) == 10

        patch = {"timeout_seconds": 30, "schedule": {"cron": "0 4 * * *"}}
        _problem(await http.patch("/api/v1/jobs/etl", json=patch), 428)
        changed = await http.patch("/api/v1/jobs/etl", json=patch, headers={"If-Match": '"1"'})
        assert changed.status_code == 200, changed.text
        assert (changed.json()["version"], changed.json()["spec"]["timeout_seconds"]) == (2, 30)
        assert changed.json()["spec"]["schedule"]["cron"] == "0 4 * * *"
        # every field of a record shows, those at their defaults too (records are stored without them)
        assert (changed.json()["fired_by_mark"], changed.json()["paused_at"]) == (False, None)
        assert (read.json()["spec"]["secrets"], read.json()["spec"]["exclude_calendars"]) == ([], [])
        # a client that read version 1 and writes now would undo the change above: refused, nothing written
        stale = await http.patch("/api/v1/jobs/etl", json={"timeout_seconds": 99}, headers={"If-Match": '"1"'})
        assert "version 2, not 1" in _problem(stale, 409)["detail"]
        renamed = await http.patch("/api/v1/jobs/etl", json={"name": "other"}, headers={"If-Match": '"2"'})
        assert _problem(renamed, 422)["field"] == "name"
        bad = await http.patch("/api/v1/jobs/etl", json={"resources": {"cpu": -1}}, headers={"If-Match": '"2"'})
        assert _problem(bad, 422)["field"] == "resources.cpu"
        final = (await http.get("/api/v1/jobs/etl/spec")).json()
        assert (final["version"], final["spec"]["timeout_seconds"]) == (2, 30)


async def test_preview_backfill_dlq_and_tenants(rest: Rest) -> None:
    async with rest.http(await rest.token("acme")) as http, rest.http(await rest.token(None)) as admin:
        # preview: New York's spring-forward gap skips 02:30 on 2027-03-14
        shown = await http.get("/api/v1/schedule/preview", params={
            "cron": "30 2 * * *", "timezone": "America/New_York", "from": "2027-03-13T00:00:00Z", "count": 3,
            "on_gap": "skip"})
        assert shown.status_code == 200, shown.text
        assert [r["skipped"] is not None for r in shown.json()] == [False, True, False, False]
        bad_zone = await http.get("/api/v1/schedule/preview", params={"cron": "* * * * *", "timezone": "Mars/X",
                                                                      "from": "2027-01-01T00:00:00Z"})
        assert _problem(bad_zone, 422)["field"] == "timezone"

        # backfill: one run per occurrence in [from, to)
        assert (await http.post("/api/v1/jobs", json={"name": "daily", "command": "true",
                                                      "schedule": "0 0 * * *"})).status_code == 201
        filled = await http.post("/api/v1/jobs/daily/backfill", json={"from": "2026-11-01T00:00:00Z",
                                                                      "to": "2026-11-03T00:00:00Z"})
        assert filled.status_code == 200, filled.text
        assert [r["run_id"] for r in filled.json()["items"]] == ["acme.daily.20261101T000000000Z",
                                                                  "acme.daily.20261102T000000000Z"]

        # dlq: a job that fails for good lands there and is replayed as a new run
        assert (await http.post("/api/v1/jobs", json={"name": "doomed", "command": "exit 3",
                                                      "retry_policy": {"max_retries": 0}})).status_code == 201
        assert (await _job_when(http, "doomed", {"dead", "failed"}))["status"] == "failed"

        async def dead_lettered() -> list[dict[str, Any]] | None:
            items: list[dict[str, Any]] = (await http.get("/api/v1/dlq")).json()["items"]
            return items or None

        dead = await wait_for(dead_lettered, 15, what="the dead letter")
        replayed = await http.post(f"/api/v1/dlq/{dead[0]['run_id']}/replay")
        assert replayed.status_code == 201 and replayed.json()["run_id"] != dead[0]["run_id"], replayed.text
        keyed = [await http.post(f"/api/v1/dlq/{dead[0]['run_id']}/replay", headers={"Idempotency-Key": "once"})
                 for _ in range(2)]
        assert keyed[0].json()["run_id"] == keyed[1].json()["run_id"] != replayed.json()["run_id"]

        # tenants: the admin's
        assert _problem(await http.put("/api/v1/tenants/acme", json={"weight": 5}), 403)["code"] == "forbidden"
        assert _problem(await http.get("/api/v1/tenants"), 403)["code"] == "forbidden"
        assert (await admin.put("/api/v1/tenants/acme", json={"weight": 5, "max_cpu": 4})).status_code == 200
        assert _problem(await admin.put("/api/v1/tenants/acme", json={"weight": -1}), 422)["field"] == "weight"
        tenants = (await admin.get("/api/v1/tenants")).json()["items"]
        assert [(t["tenant"], t["weight"], t["max_cpu"]) for t in tenants] == [("acme", 5.0, 4.0)]

        # admission: over its submit rate, a tenant gets 429 with Retry-After
        assert (await admin.put("/api/v1/tenants/acme", json={"max_submits_per_second": 0.2})).status_code == 200
        yearly = {"command": "true", "schedule": "0 0 1 1 *"}
        tries = iter(range(100))

        async def limited() -> httpx.Response | None:  # the api re-reads a policy at most once a second
            answer = await http.post("/api/v1/jobs", json={"name": f"fast-{next(tries)}", **yearly})
            return answer if answer.status_code == 429 else None

        refused = await wait_for(limited, 10, what="a 429")
        assert _problem(refused, 429)["code"] == "rate_limited" and 1 <= int(refused.headers["retry-after"]) <= 5

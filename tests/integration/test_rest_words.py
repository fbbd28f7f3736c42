"""The REST API's words through the real gateway: status words and what they find, filters before paging, paused
jobs, absolute logs URLs, the create body's full spec and its warnings."""

from __future__ import annotations

import asyncio
import itertools
import re
from typing import Any

import httpx
from harness import Services, wait_for
from rest_support import Rest

from jetcron_services.gateway.status import JOB_WORDS, RUN_WORDS

YEARLY = {"command": "true", "schedule": "0 0 1 1 *"}


async def _ended(http: httpx.AsyncClient, job_id: str) -> dict[str, Any]:
    async def done() -> dict[str, Any] | None:
        body: dict[str, Any] = (await http.get(f"/api/v1/jobs/{job_id}")).json()
        return body if body["state"] in ("succeeded", "dead", "failed") else None

    result: dict[str, Any] = await wait_for(done, 40, what=f"job {job_id} to end")
    return result


async def _pages(http: httpx.AsyncClient, path: str, limit: int, **params: str) -> list[list[str]]:
    pages: list[list[str]] = []
    cursor: str | None = None
    while True:
        got = await http.get(path, params={**params, "limit": limit, **({"cursor": cursor} if cursor else {})})
        assert got.status_code == 200, got.text
        pages.append([item.get("job_id") or item["run_id"] for item in got.json()["items"]])
        cursor = got.json()["next_cursor"]
        if cursor is None:
            return pages


def _flat(pages: list[list[str]]) -> list[str]:
    return [item for page in pages for item in page]


def _problem(response: httpx.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/problem+json"), response.headers
    body: dict[str, Any] = response.json()
    return body


async def test_each_status_word_finds_its_jobs_before_paging_and_a_paused_job_is_paused(rest: Rest) -> None:
    async with rest.http(await rest.token("acme")) as http:
        # Given jobs that succeeded, died and never ran, interleaved by name, and one that ran and is now paused
        bodies: dict[str, dict[str, Any]] = {}
        for i in range(5):
            bodies[f"a{i}-later"], bodies[f"a{i}-ok"] = YEARLY, {"command": "true"}
        for i in range(2):
            bodies[f"b{i}-bad"] = {"command": "exit 3", "retry_policy": {"max_retries": 0}}
        bodies["c-rested"] = {"command": "true"}
        made = await asyncio.gather(*(http.post("/api/v1/jobs", json={"name": n, **b}) for n, b in bodies.items()))
        assert [m.status_code for m in made] == [201] * len(bodies), [m.text for m in made]
        ran = [name for name, body in bodies.items() if body is not YEARLY]
        ended = dict(zip(ran, await asyncio.gather(*(_ended(http, name) for name in ran)), strict=True))
        # each shows the design's word as its status, and jetcron's exact state beside it
        assert {name: (job["status"], job["state"]) for name, job in ended.items()} == {
            **{f"a{i}-ok": ("completed", "succeeded") for i in range(5)}, "b0-bad": ("failed", "dead"),
            "b1-bad": ("failed", "dead"), "c-rested": ("completed", "succeeded")}
        later = (await http.get("/api/v1/jobs/a0-later")).json()
        assert (later["status"], later["state"], later["run_state"]) == ("queued", None, None), later
        assert (await http.post("/api/v1/jobs/c-rested/pause")).status_code == 200

        # Then each word finds what it stands for: the design's and jetcron's
        ok, bad, later = ([n for n in sorted(bodies) if n.endswith(end)] for end in ("-ok", "-bad", "-later"))
        expected = {"completed": ok, "succeeded": ok, "failed": bad, "dead": bad, "queued": later,
                    "paused": ["c-rested"], "running": [], "cancelled": [], "retry_wait": []}
        for word, names in expected.items():
            assert _flat(await _pages(http, "/api/v1/jobs", 50, status=word)) == names, word
        # And a paused job shows paused whatever its run did; its run's own state is still there
        rested = (await http.get("/api/v1/jobs/c-rested")).json()
        assert (rested["status"], rested["state"], rested["run_state"], rested["paused"]) == (
            "paused", "paused", "succeeded", True)

        # And a filtered listing gives full pages, its cursor missing nothing: the filter applies before paging
        pages = await _pages(http, "/api/v1/jobs", 2, status="completed")
        assert all(len(page) == 2 for page in pages[:-1]) and _flat(pages) == ok, pages
        assert pages[0] == ["a0-ok", "a1-ok"]  # not an empty page for the a0-later that comes first
        assert _flat(await _pages(http, "/api/v1/jobs", 3, status="queued")) == later

        # And runs take the same words (one listing per state a word covers, merged by id)
        runs = await _pages(http, "/api/v1/runs", 50, state="failed")
        assert [run_id.split(".")[1] for run_id in _flat(runs)] == bad
        completed = _flat(await _pages(http, "/api/v1/runs", 2, state="completed"))
        assert sorted(run_id.split(".")[1] for run_id in completed) == [*ok, "c-rested"]

        # And an unknown word is a 400 naming the field, the value and every word allowed
        for path, name, allowed in (("/api/v1/jobs", "status", JOB_WORDS), ("/api/v1/runs", "state", RUN_WORDS)):
            refused = _problem(await http.get(path, params={name: "done"}), 400)
            assert (refused["field"], refused["value"], refused["code"]) == (name, "done", "invalid"), refused
            assert refused["detail"] == f"{name} must be one of {', '.join(allowed)}", refused
        assert _problem(await http.get("/api/v1/runs", params={"state": "paused"}), 400)["field"] == "state"

    # And another tenant finds none of them, whatever the word
    async with rest.http(await rest.token("globex")) as other:
        for word in ("completed", "paused", "queued"):
            assert (await other.get("/api/v1/jobs", params={"status": word})).json()["items"] == [], word


async def test_logs_url_is_absolute_as_the_request_came_or_as_configured(rest: Rest,
                                                                         secure_services: Services) -> None:
    token = await rest.token("acme")
    async with rest.http(token) as http:
        assert (await http.post("/api/v1/jobs", json={"name": "talk", "command": "echo hi"})).status_code == 201
        job = await _ended(http, "talk")
        path = f"/api/v1/runs/{job['run_id']}/logs"
        # Without the setting: the scheme, host and port the request came in by
        assert job["logs_url"] == f"{rest.url}{path}"
        assert (await http.get(job["logs_url"])).text == "hi\n"
        proxied = (await http.get("/api/v1/jobs/talk", headers={"Host": "jobs.internal:8443"})).json()
        assert proxied["logs_url"] == f"http://jobs.internal:8443{path}"
        listed = (await http.get("/api/v1/jobs")).json()["items"]
        assert [j["logs_url"] for j in listed] == [f"{rest.url}{path}"]

    # With JETCRON_HTTP_PUBLIC_URL: that URL, whatever host the request named
    gateway = secure_services.start("gateway-public", "gateway", JETCRON_HTTP_PORT="0",
                                    JETCRON_HTTP_PUBLIC_URL="https://jetcron.example.com/scheduler/")
    await gateway.wait_logged("gateway ready", 30)
    found = re.search(r"http://127\.0\.0\.1:(\d+)/api/v1", gateway.output())
    assert found, gateway.output()
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{found.group(1)}",
                                 headers={"Authorization": f"Bearer {token}"}, timeout=30) as public:
        shown = (await public.get("/api/v1/jobs/talk")).json()
        assert shown["logs_url"] == f"https://jetcron.example.com/scheduler{path}", shown
        listed = (await public.get("/api/v1/jobs", params={"status": "completed"})).json()["items"]
        assert [j["logs_url"] for j in listed] == [f"https://jetcron.example.com/scheduler{path}"]


async def test_the_create_body_takes_the_full_spec_and_answers_its_warnings(rest: Rest) -> None:
    spec_shaped = {
        "command": ["python", "train.py"], "image": "ghcr.io/acme/train:1", "overlap": "skip",
        "schedule": {"kind": "cron", "cron": "0 3 * * *", "tz": "Europe/Paris"},
        "resources": {"cpu": 4, "memory_mb": 8192, "gpus": 8, "hosts": 2, "gpu_model": "H100"},
        "require": {"zone": "a"}, "misfire": {"kind": "all", "max_catchup": 3},
        "jitter": {"window_seconds": 30}, "retry": {"max_attempts": 5, "non_retryable_exit_codes": [2]}}
    async with rest.http(await rest.token("acme")) as http:
        # A body of the spec's fields is stored as it is; no agent here could run it, and the reply says so
        tries = itertools.count()

        async def warned() -> dict[str, Any] | None:  # placement's capacity summary may not be published yet
            made = await http.post("/api/v1/jobs", json={"name": f"train-{next(tries)}", **spec_shaped})
            assert made.status_code == 201, made.text
            body: dict[str, Any] = made.json()
            return body if body["warnings"] else None

        created = await wait_for(warned, 30, what="a create answered with its warnings")
        assert created["status"] == "queued" and created["warnings"][0].startswith("unsatisfiable: "), created
        stored = (await rest.admin.call("jobs.get", {"name": f"acme.{created['job_id']}"}))["job"]
        assert stored["warnings"] == created["warnings"]
        spec = (await http.get(f"/api/v1/jobs/{created['job_id']}/spec")).json()["spec"]
        assert spec["resources"] == {"cpu": 4.0, "memory_mb": 8192, "gpus": 8, "gpu_model": "H100", "hosts": 2}
        assert (spec["image"], spec["overlap"], spec["require"]) == ("ghcr.io/acme/train:1", "skip", {"zone": "a"})
        assert (spec["misfire"]["kind"], spec["misfire"]["max_catchup"], spec["jitter"]["window_seconds"]) == \
            ("all", 3, 30.0)
        assert (spec["retry"]["max_attempts"], spec["retry"]["non_retryable_exit_codes"]) == (5, [2])
        assert (spec["schedule"]["cron"], spec["schedule"]["tz"], spec["command"]) == \
            ("0 3 * * *", "Europe/Paris", ["python", "train.py"])

        # The design's fields and the spec's mix, each under its own name
        mixed = await http.post("/api/v1/jobs", json={
            "name": "mixed", "command": "echo hi", "schedule": "0 4 * * *", "timezone": "Asia/Tokyo",
            "resources": {"memory_gb": 2, "gpus": 1, "gpu_model": "A100"}, "retry_policy": {"max_retries": 1},
            "overlap": "buffer_one", "jitter": {"random_seconds": 5}})
        assert mixed.status_code == 201, mixed.text
        spec = (await http.get("/api/v1/jobs/mixed/spec")).json()["spec"]
        assert (spec["resources"]["memory_mb"], spec["resources"]["gpu_model"], spec["retry"]["max_attempts"],
                spec["schedule"]["tz"], spec["overlap"]) == (2048, "A100", 2, "Asia/Tokyo", "buffer_one")

        # Parts that cannot work together are refused naming the field; errors name fields as the body gave them
        cases = [
            ({"resources": {"memory_gb": 1, "memory_mb": 1024}}, "resources.memory_mb"),
            ({"retry_policy": {"max_retries": 1}, "retry": {"max_attempts": 2}}, "retry"),
            ({"schedule": {"kind": "cron", "cron": "0 * * * *"}, "timezone": "Europe/Paris"}, "timezone"),
            ({"schedule": {"kind": "cron", "cron": "61 * * * *"}}, "schedule.cron"),
            ({"schedule": {"kind": "cron", "cron": "0 * * * *", "tz": "Mars/Olympus"}}, "schedule.tz"),
            ({"resources": {"memory_mb": 0}}, "resources.memory_mb"),
            ({"resources": {"gpus": 0, "hosts": 2}}, "resources.hosts"),
            ({"overlap": "sometimes"}, "overlap"),
            ({"misfire": {"kinda": "all"}}, "misfire.kinda"),
            ({"image": "not an image!"}, "image"),
            ({"timezone": "Europe/Paris"}, "timezone"),  # with no schedule to read in it
        ]
        for extra, field in cases:
            refused = await http.post("/api/v1/jobs", json={"name": "never", "command": "true", **extra})
            assert _problem(refused, 422)["field"] == field, (extra, refused.text)
        # Another tenant's name is well formed, but not the token's to act for
        refused = await http.post("/api/v1/jobs", json={"name": "never", "command": "true", "tenant": "globex"})
        assert (_problem(refused, 403)["field"], _problem(refused, 403)["value"]) == ("tenant", "globex")
        assert _problem(await http.get("/api/v1/jobs/never"), 404)["code"] == "not_found"

    # The admin may name the tenant; the reply names the job by its key, and the tenant sees it as its own
    async with rest.http(await rest.token(None)) as admin, rest.http(await rest.token("acme")) as acme:
        made = await admin.post("/api/v1/jobs", json={"name": "by-admin", "tenant": "acme", **YEARLY})
        assert made.status_code == 201 and made.json()["job_id"] == "acme.by-admin", made.text
        assert (await acme.get("/api/v1/jobs/by-admin")).json()["status"] == "queued"

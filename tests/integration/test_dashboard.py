"""The dashboard in a real headless Chromium, on the real gateway, API, services, agent and nats-server."""

from __future__ import annotations

import re
from typing import Any

import pytest
from browser_support import Watched, chromium, log_in
from harness import wait_for
from playwright.async_api import Dialog, Page, expect
from rest_support import Rest

from jetcron.sdk.client import Client

pytestmark = pytest.mark.timeout(120)


def _accept(dialog: Dialog) -> Any:
    return dialog.accept()


async def _run_of(tenant_client: Client, job: str, states: set[str]) -> dict[str, Any]:
    async def reached() -> dict[str, Any] | None:
        items = (await tenant_client.call("runs.list", {"job": job}))["items"]
        return items[-1] if items and items[-1]["state"] in states else None

    run: dict[str, Any] = await wait_for(reached, 40, what=f"a run of {job} in {states}")
    return run


async def test_create_a_job_in_the_ui_see_it_succeed_and_follow_its_log_live(rest: Rest) -> None:
    token = await rest.token("acme")
    async with chromium() as browser:
        page = await browser.new_page()
        watched = Watched()
        watched.attach(page)
        await log_in(page, rest.url, token)

        # Create a job from the jobs page: it prints a line, waits, prints another
        await page.goto(f"{rest.url}/ui/jobs")
        await page.get_by_text("New job").click()
        await page.get_by_label("Name").fill("hello-ui")
        await page.get_by_label("Command (run by sh -c)").fill("echo first line; sleep 4; echo second line")
        await page.get_by_role("button", name="Create").click()
        await page.wait_for_url(f"{rest.url}/ui/jobs/hello-ui")
        await expect(page.get_by_role("heading", level=1)).to_contain_text("hello-ui")

        # Its run appears on the job page; open it
        link = page.locator("a[href^='/ui/runs/acme.hello-ui.']").first
        for _ in range(40):
            if await link.count():
                break
            await page.wait_for_timeout(250)
            await page.reload()
        await link.click()
        await expect(page.locator("h1")).to_contain_text("hello-ui")

        # The first line arrives while the run is still going; the second and the end follow
        log, status = page.locator("#log"), page.locator("#log-status")
        await expect(log).to_contain_text("first line", timeout=30_000)
        assert "second line" not in await log.inner_text()
        await expect(status).to_have_text("following…")
        await expect(log).to_contain_text("second line", timeout=30_000)
        await expect(status).to_have_text("the run ended: succeeded", timeout=30_000)
        await page.reload()
        await expect(page.locator("#run-state")).to_contain_text("succeeded")
        assert watched.errors == []

    client = Client(rest.admin.nc, tenant="acme")
    run = await _run_of(client, "hello-ui", {"succeeded"})
    assert (await client.call("runs.logs", {"run_id": run["run_id"]}))["output"] == "first line\nsecond line\n"


async def test_cancel_a_running_run_from_the_ui(rest: Rest) -> None:
    token = await rest.token("acme")
    client = Client(rest.admin.nc, tenant="acme")
    await client.call("jobs.create", {"spec": {"name": "long", "command": ["sleep", "300"]}})
    run = await _run_of(client, "long", {"running"})
    async with chromium() as browser:
        page = await browser.new_page()
        page.on("dialog", _accept)
        await log_in(page, rest.url, token)
        await page.goto(f"{rest.url}/ui/runs/{run['run_id']}")
        await expect(page.locator("#run-state")).to_contain_text("running")
        await page.get_by_role("button", name="Cancel run").click()
        await expect(page.locator("#run-state")).to_contain_text("cancelled", timeout=30_000)
    assert (await _run_of(client, "long", {"cancelled"}))["run_id"] == run["run_id"]


async def test_a_tenant_sees_only_its_own_jobs_and_runs(rest: Rest) -> None:
    acme, globex = await rest.token("acme"), await rest.token("globex")
    theirs = Client(rest.admin.nc, tenant="globex")
    await theirs.call("jobs.create", {"spec": {"name": "globex-secret", "command": ["echo", "globex-private"]}})
    run = await _run_of(theirs, "globex-secret", {"succeeded"})
    async with chromium() as browser:
        page = await browser.new_page()
        await log_in(page, rest.url, acme)
        await page.goto(f"{rest.url}/ui/jobs")
        assert "globex-secret" not in await page.content()
        for path in ("/ui/jobs/globex-secret", f"/ui/runs/{run['run_id']}", "/ui/flows/globex-secret"):
            response = await page.goto(f"{rest.url}{path}")
            assert response is not None and response.status == 404, path
            shown = await page.locator("main").inner_text()
            assert "not found" in shown and "globex-private" not in shown, (path, shown)
        # The admin-only pages say so instead of showing anything
        await page.goto(f"{rest.url}/ui/agents")
        await expect(page.locator(".flash")).to_contain_text("admin")

        # And globex sees its own
        other = await browser.new_page()
        await log_in(other, rest.url, globex)
        await other.goto(f"{rest.url}/ui/jobs")
        await expect(other.get_by_role("link", name="globex-secret")).to_be_visible()


async def test_every_page_loads_without_a_console_error_or_failed_request(rest: Rest) -> None:
    admin = await rest.token(None)
    client = Client(rest.admin.nc, tenant="acme")
    await client.calendars.create({"name": "holidays", "dates": ["2026-12-25"], "rules": ["weekends"]})
    await client.call("jobs.create", {"spec": {"name": "extract", "command": ["true"],
                                               "schedule": {"kind": "cron", "cron": "0 3 * * *",
                                                            "tz": "Europe/Berlin"},
                                               "env": {"API_KEY": "s3cr3t-value"},
                                               "exclude_calendars": ["holidays"]}})
    await client.call("jobs.create", {"spec": {"name": "load", "command": ["true"], "depends_on": ["extract"],
                                               "schedule": {"kind": "cron", "cron": "0 3 * * *",
                                                            "tz": "Europe/Berlin"}}})
    await client.call("jobs.create", {"spec": {"name": "broken", "command": ["false"],
                                               "retry": {"max_attempts": 1}}})
    dead = await _run_of(client, "broken", {"dead", "failed"})
    async with chromium() as browser:
        page = await browser.new_page()
        watched = Watched()
        watched.attach(page)
        await log_in(page, rest.url, admin)
        pages = ["/ui", "/ui/jobs", "/ui/jobs?q=ext", "/ui/jobs/acme.extract", "/ui/flows/acme.load",
                 f"/ui/runs/{dead['run_id']}", "/ui/agents", "/ui/dlq", "/ui/tenants", "/ui/calendars",
                 "/ui/calendars/acme.holidays"]
        for path in pages:
            response = await page.goto(f"{rest.url}{path}")
            assert response is not None and response.status == 200, (path, response and response.status)
            await page.wait_for_load_state("networkidle")
            html = await page.content()
            assert "s3cr3t-value" not in html, path
            assert "Traceback" not in html and "internal error" not in html, path
        # The overview shows the admin who leads and who holds the trigger's shards
        await page.goto(f"{rest.url}/ui")
        leaders = page.locator("#leaders")
        await expect(leaders).to_contain_text(re.compile(r"placement: placement-[0-9a-f]+"))
        await expect(leaders).to_contain_text(re.compile(r"run tracker: tracker-[0-9a-f]+"))
        await expect(leaders).to_contain_text("trigger shards held: 16 of 16")
        # The job page: schedule in words, next fires in Berlin and UTC; the flow: both jobs as boxes
        await page.goto(f"{rest.url}/ui/jobs/acme.extract")
        await expect(page.locator("main")).to_contain_text("At 03:00 AM (Europe/Berlin)")
        await expect(page.locator("main")).to_contain_text("API_KEY")
        await page.goto(f"{rest.url}/ui/flows/acme.load")
        await expect(page.locator("svg.dag text.name")).to_have_text(["acme.extract", "acme.load"])
        assert watched.errors == [], watched.errors


async def test_the_overview_charts_every_finished_run_per_minute_for_the_admin_and_a_tenant(rest: Rest) -> None:
    acme_token, admin_token = await rest.token("acme"), await rest.token(None)
    acme, globex = Client(rest.admin.nc, tenant="acme"), Client(rest.admin.nc, tenant="globex")
    for i in range(3):
        await acme.call("jobs.create", {"spec": {"name": f"ok-{i}", "command": ["true"]}})
    await acme.call("jobs.create", {"spec": {"name": "bad", "command": ["sh", "-c", "exit 3"],
                                             "retry": {"non_retryable_exit_codes": [3]}}})
    await globex.call("jobs.create", {"spec": {"name": "theirs", "command": ["true"]}})
    for i in range(3):
        await _run_of(acme, f"ok-{i}", {"succeeded"})
    await _run_of(acme, "bad", {"failed"})
    await _run_of(globex, "theirs", {"succeeded"})

    async def shown(page: Page, totals: dict[str, int]) -> None:
        """The legend gives each outcome's runs over the hour; the bars' titles add up to the same."""
        legend = page.locator("#finished-totals")
        for _ in range(60):  # the tracker leader writes once a second
            await page.goto(f"{rest.url}/ui")
            text = await legend.inner_text()
            if all(f"{outcome}: {n}" in text for outcome, n in totals.items()):
                break
            await page.wait_for_timeout(500)
        for outcome, n in totals.items():
            await expect(legend).to_contain_text(f"{outcome}: {n}")
        assert "cancelled" not in await legend.inner_text()
        titles = await page.locator("svg.chart title").all_text_contents()
        assert len(titles) == 60
        summed: dict[str, int] = {}
        for title in titles:
            for n, outcome in re.findall(r"(\d+) (\w+)", title.split("UTC: ", 1)[1]):
                summed[outcome] = summed.get(outcome, 0) + int(n)
        assert summed == totals, titles

    async with chromium() as browser:
        page = await browser.new_page()
        watched = Watched()
        watched.attach(page)
        await log_in(page, rest.url, acme_token)
        await shown(page, {"succeeded": 3, "failed": 1})  # its own, not globex's
        other = await browser.new_page()
        other_watched = Watched()
        other_watched.attach(other)
        await log_in(other, rest.url, admin_token)
        await shown(other, {"succeeded": 4, "failed": 1})  # the whole cluster
        assert watched.errors == [] and other_watched.errors == [], (watched.errors, other_watched.errors)


async def test_sessions_cookies_and_csrf(rest: Rest) -> None:
    acme = await rest.token("acme")
    async with rest.http(None) as http:
        # No session: pages redirect to the login form, actions are refused
        for path in ("/ui/jobs", "/ui/calendars", "/ui/calendars/holidays"):
            got = await http.get(path, follow_redirects=False)
            assert got.status_code == 302 and got.headers["location"] == f"/ui/login?next={path}", path
        assert (await http.post("/ui/jobs/x/pause")).status_code == 401

        # A bad token is refused with a message that says what a token is
        bad = await http.post("/ui/login", data={"token": "jct_nope"})
        assert bad.status_code == 401 and "that token is not valid" in bad.text

        # A good one gets an HttpOnly, SameSite=Strict cookie scoped to /ui, and lands where it was going
        good = await http.post("/ui/login", data={"token": acme, "next": "/ui/jobs"}, follow_redirects=False)
        assert good.status_code == 303 and good.headers["location"] == "/ui/jobs"
        cookie = good.headers["set-cookie"]
        assert re.search(r"jetcron_session=v1\.[0-9a-f]{16}\.[0-9]+\.", cookie) and acme not in cookie, cookie
        assert "HttpOnly" in cookie and "Path=/ui" in cookie and "Max-Age=43200" in cookie
        assert "samesite=strict" in cookie.lower() and "secure" not in cookie.lower()  # plain http on loopback
        # Never an open redirect
        elsewhere = await http.post("/ui/login", data={"token": acme, "next": "https://evil.example/"},
                                    follow_redirects=False)
        assert elsewhere.headers["location"] == "/ui"

        await Client(rest.admin.nc, tenant="acme").call("jobs.create", {"spec": {
            "name": "nightly", "command": ["true"], "schedule": {"kind": "cron", "cron": "0 0 * * *"}}})
        page = await http.get("/ui/jobs/nightly")
        assert page.status_code == 200
        csrf = re.search(r'name="csrf" value="([0-9a-f]{64})"', page.text)
        assert csrf

        # Without the CSRF token, or from another origin, nothing changes
        no_csrf = await http.post("/ui/jobs/nightly/pause", follow_redirects=False)
        assert no_csrf.status_code == 403 and "CSRF token" in no_csrf.text
        foreign = await http.post("/ui/jobs/nightly/pause", data={"csrf": csrf.group(1)},
                                  headers={"Origin": "https://evil.example"}, follow_redirects=False)
        assert foreign.status_code == 403 and "another origin" in foreign.text
        client = Client(rest.admin.nc, tenant="acme")
        assert (await client.call("jobs.get", {"name": "nightly"}))["job"]["status"] == "active"

        # With it, the action runs and says so
        paused = await http.post("/ui/jobs/nightly/pause", data={"csrf": csrf.group(1)}, follow_redirects=False)
        assert paused.status_code == 303 and paused.headers["location"] == "/ui/jobs/nightly?done=paused"
        assert (await client.call("jobs.get", {"name": "nightly"}))["job"]["status"] == "paused"

        # An edit with a stale version is refused and changes nothing
        stale = await http.post("/ui/jobs/nightly/edit", data={
            "csrf": csrf.group(1), "version": "1", "command": "echo changed", "schedule_kind": "cron",
            "cron": "0 1 * * *", "tz": "UTC"}, follow_redirects=False)
        assert stale.status_code == 303 and "error=" in stale.headers["location"], stale.headers
        assert "version" in (await http.get(stale.headers["location"])).text
        assert (await client.call("jobs.get", {"name": "nightly"}))["job"]["spec"]["command"] == ["true"]

        # Bad input names the field and the value, and stores nothing
        bad_cron = await http.post("/ui/jobs", data={"csrf": csrf.group(1), "name": "typo", "command": "true",
                                                     "schedule_kind": "cron", "cron": "61 * * * *"},
                                   follow_redirects=True)
        assert "schedule.cron" in bad_cron.text and "61 * * * *" in bad_cron.text
        assert not [j for j in (await client.call("jobs.list", {}))["items"] if j["spec"]["name"] == "typo"]

        # An unknown action is named, and changes nothing
        unknown = await http.post("/ui/jobs/nightly/explode", data={"csrf": csrf.group(1)}, follow_redirects=True)
        assert "action: must be one of trigger, pause, resume, delete, backfill, edit" in unknown.text
        assert (await client.call("jobs.get", {"name": "nightly"}))["job"]["version"] == 2

        # Logging out ends the session
        out = await http.post("/ui/logout", data={"csrf": csrf.group(1)}, follow_redirects=False)
        assert out.status_code == 303 and 'jetcron_session=""' in out.headers["set-cookie"]


async def test_the_job_page_reads_fire_times_and_spec_and_the_dlq_tells_a_replay_from_its_original(
        rest: Rest) -> None:
    acme = await rest.token("acme")
    client = Client(rest.admin.nc, tenant="acme")
    # A job on the first Sundays of November in New York, among others: 01:30 happens twice that night
    await client.call("jobs.create", {"spec": {"name": "fall", "command": ["true"],
                                               "schedule": {"kind": "cron", "cron": "30 1 * 11 0",
                                                            "tz": "America/New_York"}}})
    # And a job that dies, replayed, whose replay dies too
    await client.call("jobs.create", {"spec": {"name": "broken", "command": ["false"],
                                               "retry": {"max_attempts": 1}}})
    dead = await _run_of(client, "broken", {"dead"})
    replayed = await client.call("dlq.replay", {"run_id": dead["run_id"]})

    async def both_dead() -> list[dict[str, Any]] | None:
        items: list[dict[str, Any]] = (await client.call("dlq.list", {}))["items"]
        return items if len(items) == 2 and all(r["state"] == "dead" for r in items) else None

    await wait_for(both_dead, 40, what="the run and its replay in the dead-letter queue")

    async with rest.http(None) as http:
        await http.post("/ui/login", data={"token": acme}, follow_redirects=False)
        page = (await http.get("/ui/jobs/fall")).text

        # The next fire times read as times, in the job's zone and in UTC, and the fold is noted
        fires = page.split("<h2>Next fire times</h2>", 1)[1].split("</section>", 1)[0]
        assert not re.search(r"\d{4}-\d\d-\d\dT\d\d:\d\d", fires), fires
        assert re.search(r"<td>Sun 20\d\d-11-0[1-7] 01:30 EDT</td><td>Sun 20\d\d-11-0[1-7] 05:30 UTC</td><td>dst fold: "
                         r"01:30 happens twice in America/New_York on 20\d\d-11-0[1-7]; it runs once, in the first "
                         r"pass \(on_fold first\)</td>", fires), fires
        assert "<td>Sun 20" in fires and "</td><td></td></tr>" in fires  # the other Sundays: nothing to note

        # The spec shows what is set, not a field of nulls
        spec = page.split('<pre class="spec-json">', 1)[1].split("</pre>", 1)[0]
        assert "null" not in spec and "[]" not in spec and "30 1 * 11 0" in spec, spec

        # The dead letters: the replay names its original, and each row its own run
        dlq = (await http.get("/ui/dlq")).text
        rows = [r for r in dlq.split("<tr>")[2:]]
        assert len(rows) == 2 and rows[0] != rows[1], rows
        replay_row = next(r for r in rows if f'href="/ui/runs/{replayed["run_id"]}"' in r)
        original_row = next(r for r in rows if r is not replay_row)
        assert f'href="/ui/runs/{dead["run_id"]}"' in replay_row, replay_row
        assert replayed["run_id"].rsplit(".", 1)[1] in replay_row
        assert dead["run_id"].rsplit(".", 1)[1] in original_row and "-r1" not in original_row

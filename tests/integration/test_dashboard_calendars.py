"""The dashboard's calendars pages over plain HTTP, on the real gateway, API and services with real tokens: a tenant
sees its own calendars with their figures, each calendar in full with the jobs that name it, and its jobs' pages
link their calendars; another tenant's calendar is the same 404 as another tenant's job, and is not listed; the
admin sees every tenant's."""

from __future__ import annotations

from datetime import datetime
from html.parser import HTMLParser

import httpx
from rest_support import Rest

from jetcron.sdk.client import Client


class _Element(HTMLParser):
    """The element whose id is `element_id`: its text, the text of each of its table cells (or list items) row by
    row, and its links, so that a test compares what a page shows exactly."""

    VOID = frozenset({"br", "hr", "img", "input", "link", "meta"})

    def __init__(self, element_id: str) -> None:
        super().__init__()
        self.element_id, self.depth = element_id, 0
        self.text: list[str] = []
        self.rows: list[list[str]] = []
        self.links: list[str] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if not self.depth:
            self.depth = 1 if dict(attrs).get("id") == self.element_id else 0
            return
        self.depth += tag not in self.VOID
        if tag in ("tr", "li"):
            self.rows.append([])
        if tag in ("td", "th", "li"):
            self._cell = []
        if tag == "a":
            self.links.append(dict(attrs).get("href") or "")

    def handle_endtag(self, tag: str) -> None:
        if not self.depth:
            return
        self.depth -= tag not in self.VOID
        if tag in ("td", "th", "li") and self._cell is not None:
            self.rows[-1].append(_words("".join(self._cell)))
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self.depth:
            self.text.append(data)
            if self._cell is not None:
                self._cell.append(data)


def _words(text: str) -> str:
    return " ".join(text.split())


def element(html: str, element_id: str) -> _Element:
    found = _Element(element_id)
    found.feed(html)
    assert found.text, f"no #{element_id} on the page: {html[:800]}"
    return found


def cells(html: str, element_id: str, *, head: bool = False) -> tuple[list[list[str]], list[str]]:
    """The rows of a table (without its header row unless `head`) or a list, and its links."""
    found = element(html, element_id)
    return (found.rows if head else found.rows[1:]), found.links


def text(html: str, element_id: str) -> str:
    return _words("".join(element(html, element_id).text))


def shown(at: datetime) -> str:
    return at.strftime("%Y-%m-%d %H:%M:%S") + " UTC"


async def log_in(http: httpx.AsyncClient, token: str) -> None:
    """A dashboard session: the login form sets the cookie the client then sends."""
    login = await http.post("/ui/login", data={"token": token, "next": "/ui"}, follow_redirects=False)
    assert login.status_code == 303, login.text


def cron_job(name: str, **calendars: list[str]) -> dict[str, object]:
    return {"spec": {"name": name, "command": ["true"], "schedule": {"kind": "cron", "cron": "0 3 * * *"},
                     **calendars}}


async def test_calendars_pages_show_a_tenant_its_own_and_the_admin_every_tenants(rest: Rest) -> None:
    acme, globex = Client(rest.admin.nc, tenant="acme"), Client(rest.admin.nc, tenant="globex")
    await acme.calendars.create({"name": "holidays", "tz": "Europe/Berlin", "dates": ["2026-12-25"],
                                 "windows": ["fri 16:00-mon 08:00"], "description": "office closed"})
    # An update makes version 2: the pages show the stored version, not a constant
    holidays = await acme.calendars.update({"name": "holidays", "tz": "Europe/Berlin",
                                            "dates": ["2026-12-25", "2026-12-26"], "windows": ["fri 16:00-mon 08:00"],
                                            "description": "office closed"}, expected_version=1)
    workdays = await acme.calendars.create({"name": "workdays", "rules": ["weekdays"]})
    # globex has a calendar of the same name, and one acme has no namesake of
    theirs = await globex.calendars.create({"name": "holidays", "rules": ["weekends"]})
    freeze = await globex.calendars.create({"name": "freeze", "dates": ["2027-01-01"]})
    await acme.call("jobs.create", cron_job("payroll", exclude_calendars=["holidays"]))
    await acme.call("jobs.create", cron_job("report", exclude_calendars=["holidays"], only_calendars=["workdays"]))
    await acme.call("jobs.create", cron_job("plain"))
    await globex.call("jobs.create", cron_job("g-nightly", exclude_calendars=["holidays"]))

    async with rest.http(None) as http:
        await log_in(http, await rest.token("acme"))
        # The navigation names the page next to the other nouns
        overview = await http.get("/ui")
        assert '<a href="/ui/jobs">Jobs</a>\n    <a href="/ui/calendars">Calendars</a>' in overview.text

        # The list: acme's two calendars with their figures, no tenant column, nothing of globex's
        listed = await http.get("/ui/calendars")
        assert listed.status_code == 200, listed.text[:500]
        rows, links = cells(listed.text, "calendars", head=True)
        assert rows == [
            ["Name", "Version", "Dates", "Rules", "Windows", "Time zone", "Updated"],
            ["holidays", "2", "2", "–", "1", "Europe/Berlin", shown(holidays.updated_at)],
            ["workdays", "1", "0", "weekdays", "0", "UTC", shown(workdays.updated_at)],
        ]
        assert links == ["/ui/calendars/holidays", "/ui/calendars/workdays"]
        assert "freeze" not in listed.text and "globex" not in listed.text

        # One calendar in full, with acme's jobs that name it and where
        page = await http.get("/ui/calendars/holidays")
        assert page.status_code == 200, page.text[:500]
        assert text(page.text, "calendar-summary") == \
            f"tenant acme · time zone Europe/Berlin · version 2 · updated {shown(holidays.updated_at)}"
        assert "<p>office closed</p>" in page.text
        assert cells(page.text, "calendar-dates", head=True)[0] == [["2026-12-25"], ["2026-12-26"]]
        assert cells(page.text, "calendar-windows", head=True)[0] == [["fri 16:00-mon 08:00"]]
        assert "calendar-rules" not in page.text
        users, links = cells(page.text, "calendar-jobs")
        assert users == [["payroll", "exclude", "active"], ["report", "exclude", "active"]]
        assert links == ["/ui/jobs/payroll", "/ui/jobs/report"]
        users, _ = cells((await http.get("/ui/calendars/workdays")).text, "calendar-jobs")
        assert users == [["report", "only", "active"]]

        # The job page names its calendars, each linking to its page
        job = await http.get("/ui/jobs/report")
        assert ('<p id="job-calendars">Calendars: exclude <a href="/ui/calendars/holidays">holidays</a>, '
                'only <a href="/ui/calendars/workdays">workdays</a></p>') in job.text
        assert 'id="job-calendars"' not in (await http.get("/ui/jobs/plain")).text

        # globex's calendar is the same 404 as globex's job, by either of the names the admin could use
        their_job = await http.get("/ui/jobs/g-nightly")
        assert their_job.status_code == 404 and "job &#39;g-nightly&#39; not found" in their_job.text
        for name in ("freeze", "globex.freeze"):
            missing = await http.get(f"/ui/calendars/{name}")
            assert missing.status_code == 404, (name, missing.status_code)
            assert f"<h1>404</h1>\n<p class=\"flash bad\" role=\"alert\">calendar &#39;{name}&#39; not found</p>" \
                in missing.text, missing.text
            assert "2027-01-01" not in missing.text

    async with rest.http(None) as http:
        await log_in(http, await rest.token(None))
        # The admin: every tenant's calendars, with their tenant, each linked by its key
        rows, links = cells((await http.get("/ui/calendars")).text, "calendars")
        assert rows == [
            ["holidays", "acme", "2", "2", "–", "1", "Europe/Berlin", shown(holidays.updated_at)],
            ["workdays", "acme", "1", "0", "weekdays", "0", "UTC", shown(workdays.updated_at)],
            ["freeze", "globex", "1", "1", "–", "0", "UTC", shown(freeze.updated_at)],
            ["holidays", "globex", "1", "0", "weekends", "0", "UTC", shown(theirs.updated_at)],
        ]
        assert links == ["/ui/calendars/acme.holidays", "/ui/calendars/acme.workdays", "/ui/calendars/globex.freeze",
                         "/ui/calendars/globex.holidays"]
        # Each calendar's users are its own tenant's jobs only, though globex's job names a calendar `holidays` too
        users, links = cells((await http.get("/ui/calendars/acme.holidays")).text, "calendar-jobs")
        assert users == [["payroll", "exclude", "active"], ["report", "exclude", "active"]]
        assert links == ["/ui/jobs/acme.payroll", "/ui/jobs/acme.report"]
        users, links = cells((await http.get("/ui/calendars/globex.holidays")).text, "calendar-jobs")
        assert (users, links) == ([["g-nightly", "exclude", "active"]], ["/ui/jobs/globex.g-nightly"])
        users, _ = cells((await http.get("/ui/calendars/globex.freeze")).text, "calendar-jobs")
        assert users == [["No job names it."]]
        # And the admin's job page links the calendar by its key
        job = await http.get("/ui/jobs/acme.payroll")
        assert '<p id="job-calendars">Calendars: exclude <a href="/ui/calendars/acme.holidays">holidays</a></p>' \
            in job.text

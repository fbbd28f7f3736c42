"""The calendars pages: the viewer's calendars, and one calendar with the jobs that name it."""

from __future__ import annotations

from typing import Any

from litestar import Request, get
from litestar.response import Template

from jetcron.core.models import JobRecord
from jetcron_services.gateway.ui import present
from jetcron_services.gateway.ui.pages._kit import PAGE, SEARCH_PAGES, page_context
from jetcron_services.gateway.ui.session import UI


@get(f"{UI}/calendars", include_in_schema=False)
async def calendars_page(request: Request[Any, Any, Any], cursor: str | None = None) -> Template:
    """The viewer's calendars (the admin: every tenant's), a cursor page of them."""
    ctx = page_context(request)
    page = await ctx.client.calendars.list(cursor=cursor or None, limit=PAGE)
    rows = [{"record": r, "ref": ctx.ref(r.spec)} for r in page.items]
    return ctx.page("calendars.html", rows=rows, next_cursor=page.next_cursor)


@get(f"{UI}/calendars/{{name:str}}", include_in_schema=False)
async def calendar_page(request: Request[Any, Any, Any], name: str) -> Template:
    """One calendar in full, and the viewer's jobs that name it (another tenant's calendar: the API's 404)."""
    ctx = page_context(request)
    c = ctx.client
    record = await c.calendars.get(name)
    jobs: list[JobRecord] = []
    cursor: str | None = None
    # The jobs the viewer can see, read in pages as the jobs page's search reads them and bounded the same way
    # (a job's record does not index its calendars, so finding its users is a scan of the list).
    for _ in range(SEARCH_PAGES):
        page = await c.jobs.list(cursor=cursor, limit=500)
        jobs.extend(page.items)
        cursor = page.next_cursor
        if not cursor:
            break
    uses = [{"job": job, "ref": ctx.ref(job.spec), "where": where}
            for job, where in present.calendar_uses(record.spec, jobs)]
    return ctx.page("calendar.html", record=record, spec=record.spec, uses=uses, read=len(jobs),
                    partial=cursor is not None)

"""Calendar routes: create, list, get, replace, delete, and a job's fire times under an edited calendar
(docs/calendars.md). The API's calendars.* verbs, no logic of their own."""

from __future__ import annotations

from typing import Annotated, Any

import msgspec
from litestar import Request, delete, get, post, put
from litestar.params import Parameter

from jetcron.core.timing.calendar_time import Compiled, compile_calendar
from jetcron.core.timing.calendars import CalendarRecord
from jetcron.core.timing.exclusions import JobCalendars
from jetcron.sdk.client import Client
from jetcron.sdk.errors import ApiError
from jetcron.wire.api import CalendarPreview
from jetcron_services.gateway.gate import API, HttpProblem, WholeResponse, own_tenant, strict_body, version_of
from jetcron_services.gateway.gate import who as _who
from jetcron_services.gateway.problems import problem


class CalendarBody(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    tz: str = "UTC"
    """IANA zone the dates, rules and windows without an offset are read in."""
    dates: list[str] = msgspec.field(default_factory=list)
    """Whole days, YYYY-MM-DD."""
    rules: list[str] = msgspec.field(default_factory=list)
    """`weekdays` or `weekends`."""
    windows: list[str] = msgspec.field(default_factory=list)
    """'fri 16:00-mon 08:00' (weekly), '22:00-06:00' (daily), or 'START/END' in ISO 8601."""
    description: str = ""
    ics: str | None = None
    """An iCalendar file's text: its events' days and times are added to the dates and windows."""
    tenant: str | None = None
    """The caller's own tenant (a tenant's token) or any (the admin's)."""


class CreateCalendar(CalendarBody, kw_only=True):
    name: str


class CalendarView(msgspec.Struct, kw_only=True):
    calendar_id: str
    """How the caller names it in the routes: its name (a tenant's token), its key `tenant.name` (the admin's)."""
    calendar: CalendarRecord


class CalendarPage(msgspec.Struct, kw_only=True):
    items: list[CalendarView]
    next_cursor: str | None


def _view(record: CalendarRecord, tenant: str | None) -> CalendarView:
    return CalendarView(calendar_id=record.spec.name if tenant is not None else record.spec.key, calendar=record)


async def named_calendars(c: Client, exclude: str, only: str) -> JobCalendars:
    """The calendars a preview names (comma-separated), the caller's own; a name none has is 422 naming the
    parameter, as an unknown one in a job's spec is."""

    async def one(param: str, name: str) -> tuple[str, Compiled | None]:
        try:
            return name, compile_calendar((await c.calendars.get(name)).spec)
        except ApiError as exc:
            if exc.code in ("not_found", "invalid"):
                raise HttpProblem(problem(422, f"{param}: no such calendar {name!r}", code="invalid", field=param,
                                          value=name[:200])) from None
            raise

    def names(text: str) -> list[str]:
        return [n.strip() for n in text.split(",") if n.strip()]

    return JobCalendars(exclude=tuple([await one("exclude", n) for n in names(exclude)]),
                        only=tuple([await one("only", n) for n in names(only)]))


def _calendar(body: CalendarBody, name: str) -> tuple[dict[str, Any], str | None]:
    """The API's calendar and ICS text for a body."""
    plain: dict[str, Any] = msgspec.to_builtins(body)
    ics = plain.pop("ics", None)
    plain.pop("name", None)
    if plain.get("tenant") is None:
        plain.pop("tenant", None)
    return {"name": name, **plain}, ics


def _as_stored(body: CalendarBody, stored: CalendarRecord) -> tuple[dict[str, Any], str | None]:
    """The API's calendar for a body that replaces (or previews an edit of) the stored one the path names: its name
    and tenant are the stored one's."""
    if body.tenant is not None and body.tenant != stored.spec.tenant:
        raise HttpProblem(problem(422, "a calendar's tenant cannot change (create another calendar)", code="invalid",
                                  field="tenant", value=body.tenant[:200]))
    calendar, ics = _calendar(body, stored.spec.name)
    return {**calendar, "tenant": stored.spec.tenant}, ics


def _fields(field: str | None) -> str | None:
    return field.removeprefix("calendar.") if field else field


def _etag(record: CalendarRecord) -> dict[str, str]:
    return {"ETag": f'"{record.version}"'}


def _version(header: str | None) -> int | None:
    """The version an optional If-Match names."""
    version = version_of(header)
    if header is not None and version is None:
        raise HttpProblem(problem(422, "If-Match names the calendar's version (its ETag)", code="invalid",
                                  field="If-Match", value=header[:40]))
    return version


@post(f"{API}/calendars", status_code=201, summary="Create a named calendar")
async def create_calendar(request: Request[Any, Any, Any], data: dict[str, Any]) -> WholeResponse[CalendarView]:
    gate, caller = await _who(request)
    body = strict_body(data, CreateCalendar)
    own_tenant(caller, body.tenant)
    calendar, ics = _calendar(body, body.name)
    record = await gate.api(caller, lambda c: c.calendars.create(calendar, ics=ics), fields=_fields)
    view = _view(record, caller.tenant)
    return WholeResponse(view, status_code=201, headers={"Location": f"{API}/calendars/{view.calendar_id}",
                                                    **_etag(record)})


@get(f"{API}/calendars", summary="List calendars (cursor pagination)")
async def list_calendars(request: Request[Any, Any, Any], cursor: str | None = None,
                         limit: Annotated[int, Parameter(ge=1, le=1000)] = 100) -> CalendarPage:
    gate, caller = await _who(request)
    page = await gate.api(caller, lambda c: c.calendars.list(cursor=cursor, limit=limit))
    return CalendarPage(items=[_view(r, caller.tenant) for r in page.items], next_cursor=page.next_cursor)


@get(f"{API}/calendars/{{name:str}}", summary="A calendar (its version is the ETag)")
async def get_calendar(request: Request[Any, Any, Any], name: str) -> WholeResponse[CalendarView]:
    gate, caller = await _who(request)
    record = await gate.api(caller, lambda c: c.calendars.get(name))
    return WholeResponse(_view(record, caller.tenant), headers=_etag(record))


@put(f"{API}/calendars/{{name:str}}", summary="Replace a calendar, from each job's next occurrence")
async def replace_calendar(request: Request[Any, Any, Any], name: str,
                           data: dict[str, Any]) -> WholeResponse[CalendarView]:
    gate, caller = await _who(request)
    body = strict_body(data, CalendarBody)
    own_tenant(caller, body.tenant)
    expected = _version(request.headers.get("if-match"))

    async def change(c: Client) -> CalendarRecord:
        stored = await c.calendars.get(name)  # a 404 for one the caller cannot see; its key for the admin
        calendar, ics = _as_stored(body, stored)
        return await c.calendars.update(calendar, ics=ics, expected_version=expected)

    record = await gate.api(caller, change, fields=_fields)
    return WholeResponse(_view(record, caller.tenant), headers=_etag(record))


@delete(f"{API}/calendars/{{name:str}}", status_code=200, summary="Delete a calendar no job names")
async def delete_calendar(request: Request[Any, Any, Any], name: str) -> CalendarView:
    gate, caller = await _who(request)
    return _view(await gate.api(caller, lambda c: c.calendars.delete(name)), caller.tenant)


@post(f"{API}/calendars/{{name:str}}/preview", status_code=200,
      summary="A job's next fire times with this calendar as the body gives it (nothing stored)")
async def preview_calendar(request: Request[Any, Any, Any], name: str, data: dict[str, Any], job: str,
                           count: Annotated[int, Parameter(ge=1, le=100)] = 10) -> CalendarPreview:
    gate, caller = await _who(request)
    body = strict_body(data, CalendarBody)
    own_tenant(caller, body.tenant)

    async def show(c: Client) -> CalendarPreview:
        stored = await c.calendars.get(name)
        calendar, ics = _as_stored(body, stored)
        return await c.calendars.preview(calendar, job, count=count, ics=ics)

    return await gate.api(caller, show, fields=_fields)


ROUTES: list[Any] = [create_calendar, list_calendars, get_calendar, replace_calendar, delete_calendar,
                     preview_calendar]

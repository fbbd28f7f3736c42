"""Every field of every REST body, as the OpenAPI document the gateway serves names it (its properties, and theirs
all the way down), either reaches the API request the route makes or is refused naming it: none is taken and
dropped. Each is given alone beside a body's required fields, with a value that is not its default; the gateway
runs over the api's own verbs on the twins (rest_twin), which record every request it makes."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from rest_twin import Gateway, gateway

from jetcron_services.gateway.contract import OPS, Op, document

DOC = document()
SCHEMAS: dict[str, Any] = DOC["components"]["schemas"]
REFUSED = (400, 403, 422)
"""How a field the route will not take is answered (403: a tenant's token naming another tenant)."""

ICS = "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nBEGIN:VEVENT\r\nDTSTART;VALUE=DATE:20261225\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n"
SAMPLES: dict[str, Any] = {
    "schedule": "0 3 * * *", "timezone": "Europe/Paris", "command": "echo walked", "image": "ghcr.io/acme/walk:1",
    "cron": "0 4 * * *", "at": "2027-01-01T00:00:00Z", "anchor": "2026-12-01T00:00:00Z", "tz": "Asia/Tokyo",
    "webhook": "https://hooks.example.com/walk", "subject": "alerts.walk", "email": "ops@example.com",
    "secret": "WALK_SECRET", "windows": ["22:00-06:00"], "ics": ICS, "gpu_model": "H100", "name": "walked",
}
"""Values a field's schema alone does not make a good one of, by the field's own name."""
BACKFILL = {"from": "2026-12-01T00:00:00Z", "to": "2026-12-01T06:00:00Z"}


def _resolved(schema: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        schema = SCHEMAS[schema["$ref"].rsplit("/", 1)[1]]
    return schema


def _branches(schema: dict[str, Any]) -> list[dict[str, Any]]:
    schema = _resolved(schema)
    return [_resolved(b) for b in schema.get("anyOf", [schema]) if _resolved(b).get("type") != "null"]


def _object(schema: dict[str, Any]) -> dict[str, Any] | None:
    """The branch of `schema` that is an object with named properties, if any."""
    return next((b for b in _branches(schema) if b.get("type") == "object" and "properties" in b), None)


def sample(schema: dict[str, Any], name: str, *, other: bool = False) -> Any:
    """A valid value for a field named `name` that is not its default (`other`: another one still)."""
    if SAMPLES.get(name) is not None and not other:
        return SAMPLES[name]
    whole = _resolved(schema)
    default = whole.get("default", schema.get("default"))
    branch = _branches(schema)[0]
    if "enum" in branch:
        choices = [v for v in branch["enum"] if v != default]
        return choices[-2 if other and len(choices) > 1 else -1]
    kind = branch.get("type")
    if kind == "boolean":
        return not default
    if kind in ("integer", "number"):
        low = branch.get("minimum", branch.get("exclusiveMinimum", 0))
        value = low + (2 if other else 1) + (0.5 if kind == "number" else 0)
        value = min(value, branch.get("maximum", value))
        return value if value != default else value - 1
    if kind == "string":
        if branch.get("format") == "date-time":
            return "2026-12-02T00:00:00Z" if other else "2026-12-01T12:00:00Z"
        if branch.get("format") == "date":
            return "2027-01-01" if other else "2026-12-25"
        return "walk-two" if other else "walk"
    if kind == "array":
        return [sample(branch["items"], name, other=other)]
    if kind == "object" and "properties" in branch:
        return minimal(branch)
    if kind == "object":
        return {"walk": sample(branch["additionalProperties"], name, other=other)}
    raise AssertionError(f"{name}: no sample for {schema}")


def minimal(schema: dict[str, Any]) -> dict[str, Any]:
    """An object of `schema` with its required properties alone."""
    obj = _object(schema)
    assert obj is not None, schema
    return {name: sample(obj["properties"][name], name) for name in obj.get("required", [])}


def fields(schema: dict[str, Any], path: tuple[str | int, ...] = ()) -> Iterator[tuple[tuple[str | int, ...],
                                                                                     dict[str, Any]]]:
    """Every field under `schema`: a path (property names; 0 for an array's item, "walk" for a map's value) and
    its schema."""
    for branch in _branches(schema):
        if branch.get("type") == "object" and "properties" in branch:
            for name, sub in branch["properties"].items():
                yield (*path, name), sub
                yield from fields(sub, (*path, name))
        elif branch.get("type") == "array":
            yield from fields(branch["items"], (*path, 0))
        elif branch.get("type") == "object" and isinstance(branch.get("additionalProperties"), dict):
            yield from fields(branch["additionalProperties"], (*path, "walk"))


def with_field(body: dict[str, Any], schema: dict[str, Any], path: tuple[str | int, ...], value: Any) -> Any:
    """`body` (an instance of `schema`) with the field at `path` set to `value`, the objects on the way made as
    they must be."""
    if not path:
        return value
    head, rest = path[0], path[1:]
    if isinstance(head, int):
        item = _branches(schema)[0]["items"]
        inner = minimal(item) if _object(item) else None
        return [with_field(inner, item, rest, value)]  # type: ignore[arg-type]
    obj = _object(schema)
    if obj is not None and head in obj["properties"]:
        sub = obj["properties"][head]
    else:  # a map's value
        sub = next(b for b in _branches(schema) if b.get("type") == "object")["additionalProperties"]
    current = (body or {}).get(head)
    if rest and not isinstance(current, dict | list):
        current = minimal(sub) if _object(sub) else None
    return {**(body or {}), head: with_field(current, sub, rest, value)}  # type: ignore[arg-type]


def named(path: tuple[str | int, ...]) -> str:
    """A field's path as a problem names it: `resources.cpu`, `notify[0].subject`."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _body_ops() -> list[Op]:
    return [op for op in OPS if DOC["paths"][op.path][op.method].get("requestBody")]


def _schema_of(op: Op) -> dict[str, Any]:
    content = DOC["paths"][op.path][op.method]["requestBody"]["content"]
    return _resolved(content["application/json"]["schema"])


def _fields(op: Op) -> list[tuple[tuple[str | int, ...], dict[str, Any]]]:
    """The fields walked: all but an object given alone (its own fields are walked)."""
    return [(path, schema) for path, schema in fields(_schema_of(op)) if _branches(schema)[0] is not _object(schema)]


def _cases() -> Iterator[Any]:
    for op in _body_ops():
        for who in (("admin",) if op.admin else ("acme", "admin")):
            yield pytest.param(op, who, id=f"{op.operation_id}-{who}")


async def _made(gw: Gateway) -> None:
    """What the routes act on: a job, its upstream, a calendar."""
    for name in ("walk-job", "walk-up"):
        await gw.as_api("jobs.create", {"spec": {"name": name, "command": ["true"], "tenant": "acme",
                                                 "schedule": {"kind": "cron", "cron": "0 0 1 1 *"}}})
    await gw.as_api("calendars.create", {"calendar": {"name": "walk-cal", "tenant": "acme", "rules": ["weekends"]}})


def _target(op: Op, who: str) -> str:
    key = "" if who == "acme" else "acme."
    values = {"job_id": f"{key}walk-job", "run_id": "acme.walk-job.20261201T000000000Z", "name": f"{key}walk-cal",
              "tenant": "acme"}
    path = re.sub(r"\{(\w+)\}", lambda m: values[m.group(1)], op.path)
    return path + ("?job=walk-job" if op.operation_id == "previewCalendar" else "")


async def _send(gw: Gateway, op: Op, who: str, body: Any) -> tuple[int, dict[str, Any] | None, dict[str, Any]]:
    """The answer's status, the request of the op's verb the route made (None: it made none), the answer."""
    headers = gw.headers(None if who == "admin" else who)
    if op.operation_id == "patchJob":
        spec = await gw.http.get(_target(op, who) + "/spec", headers=headers)
        headers = {**headers, "If-Match": spec.headers["etag"]}
    gw.asked.calls.clear()
    answer = await gw.http.request(op.method.upper(), _target(op, who), json=body, headers=headers)
    made = gw.asked.of(op.verb or "")
    return answer.status_code, (made[-1] if made else None), answer.json()


def _base(op: Op, schema: dict[str, Any]) -> dict[str, Any]:
    body = minimal(schema)
    if op.operation_id == "createJob":
        body["name"] = "walked"
    if op.operation_id == "backfill":
        body.update(BACKFILL)
    return body


@pytest.mark.parametrize(("op", "who"), list(_cases()))
async def test_every_field_of_every_rest_body_reaches_the_api_or_is_refused_naming_it(op: Op, who: str) -> None:
    body_schema = _schema_of(op)
    wrong: list[str] = []
    async with gateway() as gw:
        await _made(gw)
        base = _base(op, body_schema)
        status, without, _ = await _send(gw, op, who, base)
        assert without is not None, f"{op.operation_id}: the base body {base} made no {op.verb} ({status})"
        for path, schema in _fields(op):
            leaf = path[-1]
            name = leaf if isinstance(leaf, str) else str(path[-2])
            # a field the base body holds already is given another value
            given = sample(schema, name, other=leaf in body_schema.get("required", ()) or leaf in base)
            status, made, answer = await _send(gw, op, who, with_field(base, body_schema, path, given))
            field = named(path)
            if made is None and (status not in REFUSED or not str(answer.get("field")).startswith(field) or
                                 str(answer.get("field"))[len(field):][:1] not in ("", ".", "[")):
                wrong.append(f"{field}={given!r}: refused {status} naming {answer.get('field')!r}: {answer}")
            elif made == without:
                wrong.append(f"{field}={given!r}: taken ({status}) and dropped: {op.verb} was asked the same "
                             "with and without it")
    assert not wrong, "\n".join(wrong)


def test_the_walk_covers_every_body_the_contract_has() -> None:
    walked = {op.operation_id for op in _body_ops()}
    assert walked == {"createJob", "patchJob", "backfill", "setRunPriority", "setTenant", "createCalendar",
                      "replaceCalendar", "previewCalendar"}
    assert sum(len(_fields(op)) for op in _body_ops()) > 150

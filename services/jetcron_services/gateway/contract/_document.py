"""The OpenAPI 3.1 document made from the rows, and the path patterns the gate holds requests to."""

from __future__ import annotations

import re
from typing import Any

import msgspec

from jetcron_services.gateway.contract._operations import OPS
from jetcron_services.gateway.contract._rows import HEADERS, JSON, TEXT, MergePatch, Op, Param
from jetcron_services.gateway.contract._rules import SEMANTIC
from jetcron_services.gateway.contract._schemas import REF, constrain, patched
from jetcron_services.gateway.gate import PathRule
from jetcron_services.gateway.problems import PROBLEM_JSON, TITLES, Problem

_NOUNS = {"job_id": "job", "run_id": "run", "delivery_id": "delivery", "name": "calendar", "tenant": "tenant"}
"""What each path parameter names, for the problem that answers one outside its pattern."""


def path_rules() -> dict[str, tuple[PathRule, ...]]:
    """Per operation (`METHOD path`), its path parameters' patterns as the document states them (gate.check_path
    holds requests to them): a name outside one is 404 where the operation can answer 404, else 422."""
    rules: dict[str, tuple[PathRule, ...]] = {}
    for op in OPS:
        status = 404 if 404 in op.problems else 422
        rules[f"{op.method.upper()} {op.path}"] = tuple(
            PathRule(p.name, re.compile(p.schema["pattern"]), _NOUNS[p.name], status)
            for p in op.params if p.where == "path")
    return rules


def document() -> dict[str, Any]:
    """The OpenAPI 3.1 document."""
    from jetcron_services.gateway.jobs import Backfill, Cancelled, SpecView

    bodies = {"backfill": Backfill}
    replies = {"getJobSpec": SpecView, "cancelJob": Cancelled}
    types: list[Any] = [Problem]
    patches: list[MergePatch] = []
    for op in OPS:
        for kind in (bodies.get(op.operation_id, op.body), replies.get(op.operation_id, op.reply)):
            if isinstance(kind, MergePatch):
                patches.append(kind)
                kind = kind.of
            if kind is not None and kind is not TEXT and kind not in types:
                types.append(kind)
    refs, components = msgspec.json.schema_components(types, ref_template=REF + "{name}")
    schema_of = dict(zip([_key(t) for t in types], refs, strict=True))
    for patch in patches:
        schema_of[_key(patch)] = {"$ref": patched(components, schema_of[_key(patch.of)]["$ref"].removeprefix(REF))}
    constrain(components)
    paths: dict[str, dict[str, Any]] = {}
    for op in OPS:
        body = bodies.get(op.operation_id, op.body)
        reply = replies.get(op.operation_id, op.reply)
        paths.setdefault(op.path, {})[op.method] = _operation(op, body, reply, schema_of)
    return {
        "openapi": "3.1.0",
        "info": {"title": "jetcron", "version": "1",
                 "description": "The jetcron REST API (docs/rest-api.md). Every route takes "
                                "`Authorization: Bearer <token>`; errors are RFC 9457 problems."},
        "servers": [{"url": "/"}],
        "paths": paths,
        "components": {"schemas": components,
                       "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}},
        "security": [{"bearer": []}],
    }


def _key(kind: Any) -> str:
    return repr(kind)


def _operation(op: Op, body: Any, reply: Any, schema_of: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"operationId": op.operation_id, "summary": op.summary, "tags": [_tag(op)]}
    description = op.description
    if op.operation_id in SEMANTIC:
        description = (description + "\n\n" if description else "") + (
            "Checked beyond this schema (422, naming the field): " + "; ".join(SEMANTIC[op.operation_id]) + ".")
    if description:
        out["description"] = description
    if op.params:
        out["parameters"] = [_param(p) for p in op.params]
    if body is not None:
        content = {media: {"schema": schema_of[_key(body)]} for media in op.body_media}
        if op.example is not None:
            for media in op.body_media:
                content[media]["example"] = op.example
        out["requestBody"] = {"required": True, "content": content}
    responses: dict[str, Any] = {str(op.status): _success(op, reply, schema_of)}
    for status in sorted({*op.problems, 401, 503}):
        responses[str(status)] = _problem(status, schema_of)
    out["responses"] = responses
    return out


def _tag(op: Op) -> str:
    if op.admin:
        return "admin"
    if "/calendars" in op.path:
        return "calendars"
    return "runs" if "/runs" in op.path or "/dlq" in op.path else "jobs"


def _param(p: Param) -> dict[str, Any]:
    out: dict[str, Any] = {"name": p.name, "in": p.where, "required": p.required or p.where == "path",
                           "schema": p.schema}
    if p.where == "query" and p.schema.get("type") == "object":
        # Its properties are query parameters of their own (`?cron=...`), and the schema says which go together.
        out.update(style="form", explode=True)
    if p.description:
        out["description"] = p.description
    return out


def _success(op: Op, reply: Any, schema_of: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"description": TITLES.get(op.status, "OK") if op.status != 200 else "OK"}
    if reply is TEXT:
        out["content"] = {TEXT: {"schema": {"type": "string"}}}
    elif reply is not None:
        out["content"] = {JSON: {"schema": schema_of[_key(reply)]}}
    if op.reply_headers:
        out["headers"] = {name: HEADERS[name] for name in op.reply_headers}
    if op.links:
        out["links"] = {name: {"operationId": target, "parameters": params}
                        for name, (target, params) in op.links.items()}
    return out


_WHY = {400: "The request is malformed (a body that is not JSON, a query value of the wrong type, an unknown "
             "filter word).",
        401: "No bearer token, or one that is unknown or revoked.",
        403: "An admin route asked with a tenant's token, or a body whose `tenant` is another tenant's.",
        404: "No such job or run, or one of another tenant (they read alike).",
        409: "It exists already, it changed since it was read, or its state does not allow this.",
        413: "The body is larger than 1 MiB.",
        422: "A field fails validation; the problem names it and its value.",
        428: "`If-Match` is required.",
        429: "Over the tenant's submit rate or pending cap, or a token's open log streams; `Retry-After` says "
             "when to try again.",
        503: "Storage or the API service is unavailable or full (`storage_full`); retry after `Retry-After`."}


def _problem(status: int, schema_of: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"description": _WHY[status],
                           "content": {PROBLEM_JSON: {"schema": schema_of[_key(Problem)]}}}
    if status in (429, 503):
        out["headers"] = {"Retry-After": HEADERS["Retry-After"]}
    elif status == 401:
        out["headers"] = {"WWW-Authenticate": HEADERS["WWW-Authenticate"]}
    return out

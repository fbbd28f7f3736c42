"""Who is asking: the bearer token's record, and a client of the API service for its tenant."""

from __future__ import annotations

import re
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import msgspec
from litestar import Request, Response
from litestar.serialization import default_serializer
from litestar.types import Serializer

from jetcron.auth.tokens import TokenRecord, token_id_of, verify
from jetcron.core.errors import JetcronError
from jetcron.core.ids import IDEMPOTENCY_KEY_RE
from jetcron.sdk.client import Client
from jetcron.sdk.errors import ApiError
from jetcron.telemetry import metrics
from jetcron.wire.codec import plain
from jetcron_services.gateway.problems import Problem, headers_for, problem, status_of

API = "/api/v1"
T = TypeVar("T")


class HttpProblem(JetcronError):
    """An answer already in HTTP's terms, sent as it is by the app's handler. In the gateway because a problem
    document is HTTP's; its code, status, field and value are the problem's."""

    def __init__(self, body: Problem, headers: dict[str, Any] | None = None) -> None:
        super().__init__(body.detail)
        self.body = body
        self.headers = headers or {}
        self.code = body.code or JetcronError.code
        self.http_status = body.status
        self.field = body.field
        self.value = body.value


FOLLOWERS = 8
FOLLOW_RETRY_SECONDS = 5


class Slot:
    """One open log stream of a token: given back once, when its stream ends, or when the stream is dropped unread
    (a client gone before the first byte)."""

    def __init__(self, followers: Followers, token_id: str) -> None:
        self.followers, self.token_id, self.held = followers, token_id, True

    def release(self) -> None:
        if self.held:
            self.held = False
            self.followers.give_back(self.token_id)

    def __del__(self) -> None:
        self.release()


@dataclass
class Followers:
    """The log streams each token has open on this replica (`?follow=1`, the dashboard's live output), at most
    `limit` at once: each polls the API for as long as it lasts, so one token could otherwise load it without
    bound."""

    limit: int = FOLLOWERS
    open: dict[str, int] = field(default_factory=dict)

    def take(self, who: TokenRecord, value: str) -> Slot:
        """A slot for one more stream of `who`'s token; 429 naming the limit when it has them all."""
        held = self.open.get(who.token_id, 0)
        if held >= self.limit:
            raise HttpProblem(problem(429, f"follow: at most {self.limit} log streams may be open at once per token "
                                           f"(JETCRON_HTTP_LOG_FOLLOWERS); token {who.token_id} has {held} open: "
                                           "close one, or read the output without following",
                                      code="rate_limited", field="follow", value=value),
                              {"Retry-After": str(FOLLOW_RETRY_SECONDS)})
        self.open[who.token_id] = held + 1
        return Slot(self, who.token_id)

    def give_back(self, token_id: str) -> None:
        left = self.open.get(token_id, 0) - 1
        if left > 0:
            self.open[token_id] = left
        else:
            self.open.pop(token_id, None)


async def held(slot: Slot, chunks: AsyncIterator[T]) -> AsyncGenerator[T, None]:
    """`chunks`, the slot given back when they end or the client goes."""
    try:
        async for chunk in chunks:
            yield chunk
    finally:
        slot.release()
        close = getattr(chunks, "aclose", None)
        if close is not None:
            await close()


@dataclass
class Gate:
    """What the routes need: who holds a token, a client for a tenant (None: the admin), and the open log
    streams."""

    lookup: Callable[[str], TokenRecord | None]
    client: Callable[[str | None], Client]
    ready: Callable[[], str | None]
    followers: Followers = field(default_factory=Followers)

    def principal(self, request: Request[Any, Any, Any]) -> TokenRecord:
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        token = token.strip()
        token_id = token_id_of(token) if scheme.lower() == "bearer" else None
        record = self.lookup(token_id) if token_id else None
        if record is None or not verify(token, record):
            metrics.child(metrics.AUTH_FAILURES, kind="http_token").inc()
            raise HttpProblem(problem(401, "a valid bearer token is required (Authorization: Bearer jct_...; "
                                      "`jetcron tokens create --tenant NAME` issues one)", code="unauthorized"),
                              {"WWW-Authenticate": 'Bearer realm="jetcron"'})
        return record

    async def api(self, who: TokenRecord, op: Callable[[Client], Awaitable[T]], *,
                  fields: Callable[[str | None], str | None] | None = None) -> T:
        """One or more typed SDK calls for the token's tenant; the API's errors as problems. `fields` names a
        field the API named in its own terms as the request did (design.rest_field for the create body)."""
        try:
            return await op(self.client(who.tenant))
        except ApiError as exc:
            status = status_of(exc.code, exc.retryable)
            field = fields(exc.field) if fields is not None else exc.field
            raise HttpProblem(problem(status, str(exc), code=exc.code, field=field, value=exc.value),
                              headers_for(status, exc.retryable, exc.retry_after)) from None


def gate_of(request: Request[Any, Any, Any]) -> Gate:
    gate: Gate = request.app.state.gate
    return gate


def public_base(request: Request[Any, Any, Any]) -> str:
    """Where the gateway's routes are reached from outside, for absolute links: JETCRON_HTTP_PUBLIC_URL, else the
    scheme, host and port this request came in by (its Host header)."""
    configured: str = request.app.state.public_url
    return configured or str(request.base_url).rstrip("/")


@dataclass(frozen=True)
class PathRule:
    """What one path parameter of a route must be (its pattern in the contract), and how one that is not is
    answered: 404 where the route names a resource (nothing can have that name), else 422."""

    name: str
    pattern: re.Pattern[str]
    noun: str
    status: int


PATH_RULES = "path_rules"
"""The app state's key for the rules of every operation's path parameters: {"METHOD path": (PathRule, ...)}."""


def check_path(request: Request[Any, Any, Any]) -> None:
    """Every path parameter of the request as the contract's pattern says, before any of it reaches a key: a
    name outside it can name nothing stored (a key the store itself refuses, `.01-2`, would be a 503)."""
    rules: dict[str, tuple[PathRule, ...]] = request.app.state.get(PATH_RULES, {})
    template = re.sub(r"\{(\w+):\w+\}", r"{\1}", str(request.scope.get("path_template", "")))
    for rule in rules.get(f"{request.method} {template}", ()):
        value = str(request.path_params.get(rule.name, ""))
        if rule.pattern.fullmatch(value):
            continue
        shown = value[:200]
        if rule.status == 404:
            raise HttpProblem(problem(404, f"{rule.name}: no {rule.noun} is named {shown!r} (a {rule.noun}'s "
                                           f"{rule.name} matches {rule.pattern.pattern})", code="not_found",
                                      field=rule.name, value=shown))
        raise HttpProblem(problem(rule.status, f"{rule.name}: {shown!r} cannot name a {rule.noun} (it must match "
                                               f"{rule.pattern.pattern})", code="invalid", field=rule.name,
                                  value=shown))


async def who(request: Request[Any, Any, Any]) -> tuple[Gate, TokenRecord]:
    """The gateway and the caller's token (401 without a valid one), the request's path parameters checked."""
    gate = gate_of(request)
    caller = gate.principal(request)
    check_path(request)
    return gate, caller


def own_tenant(caller: TokenRecord, tenant: str | None) -> None:
    """A body's `tenant` as its caller may give it: a tenant's token its own (or none), the admin's any. Another
    tenant's is 403 naming the field: the value is well formed, the caller may not act for it."""
    if caller.tenant is not None and tenant is not None and tenant != caller.tenant:
        raise HttpProblem(problem(403, f"tenant: a token of tenant {caller.tenant!r} acts for that tenant alone, "
                                       f"not for {tenant[:63]!r} (leave tenant out, or use the admin's token)",
                                  code="forbidden", field="tenant", value=tenant[:200]))


_B = TypeVar("_B")


def strict_body(data: dict[str, Any], kind: type[_B]) -> _B:
    """A request body as its type says, with no coercion: Litestar converts a handler's typed `data` leniently
    (`"enabled": 0` read as false, `"weight": "2"` as 2.0), which the contract does not allow. A body that does not
    fit is 422 naming the field."""
    try:
        return msgspec.convert(integral(data), kind, strict=True)
    except msgspec.ValidationError as exc:
        raise HttpProblem(problem(422, str(exc), code="invalid", field=field_of(str(exc)))) from None


def integral(value: Any) -> Any:
    """`value` with every float that is a whole number as an int: JSON has one kind of number, and JSON Schema's
    `integer` is any number without a fraction (`2.0` too), which a strict decode into an int field refuses. A
    float field takes an int, so nothing else changes."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {key: integral(item) for key, item in value.items()}
    if isinstance(value, list):
        return [integral(item) for item in value]
    return value


def field_of(message: str, key: str = "") -> str | None:
    """msgspec says `... - at `$.resources.cpu``, or `Object contains unknown field `x`` (with `- at `$.misfire``
    when it is inside an object: misfire.x); Litestar gives that path as the `key` beside the message instead."""
    at = message.split("- at `$", 1)[1].rstrip("`").lstrip(".") if "- at `$" in message else key
    if "unknown field `" in message:
        name = message.split("unknown field `", 1)[1].split("`", 1)[0]
        return f"{at}.{name}" if at else name
    return at or None


def idempotency_key(request: Request[Any, Any, Any]) -> str | None:
    """The request's `Idempotency-Key`, if it sent one; one outside the contract's pattern is 422 naming it."""
    key = request.headers.get("idempotency-key")
    if key is not None and not IDEMPOTENCY_KEY_RE.fullmatch(key):
        raise HttpProblem(problem(422, "Idempotency-Key: must be 1-128 ASCII letters, digits, '-' or '_'",
                                  code="invalid", field="Idempotency-Key", value=key[:200]))
    return key


IF_MATCH_RE = re.compile(r'^(W/)?"?([1-9][0-9]{0,14})"?$')
"""If-Match: "3" (or W/"3", or 3), the version a change was made on: at most 15 digits, exact as a JSON number."""


def version_of(header: str | None) -> int | None:
    """The version an If-Match header names; None when it names none (absent, or not a version)."""
    found = IF_MATCH_RE.fullmatch((header or "").strip())
    return int(found.group(2)) if found else None


class WholeResponse(Response[T]):
    """Every JSON reply of a record shows each of its fields, those at their defaults too: records are stored and
    sent without them (jetcron.core.models.stored_format), and a REST client reads `attempt` or `agent` whatever its
    value."""

    def render(self, content: Any, media_type: str, enc_hook: Serializer = default_serializer) -> bytes:
        if isinstance(content, msgspec.Struct | list | tuple):
            content = plain(content)
        return super().render(content, media_type, enc_hook)

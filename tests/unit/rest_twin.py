"""The REST gateway in this process, over the api's own verbs on the bus's twins (twin_support): the app the gateway
serves, its SDK clients answered by the api's handlers with no NATS between, and every API request it makes
recorded. For tests of what a REST request becomes and what it answers that need no server."""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import httpx
import msgspec
from litestar.testing import AsyncTestClient
from twin_support import twin_context

from jetcron.auth.tokens import TokenRecord, issue
from jetcron.bus.memory import MemoryRpc
from jetcron.sdk.client import Client
from jetcron.sdk.errors import api_error
from jetcron.wire.api import Reply, error_reply
from jetcron.wire.codec import encode, with_defaults
from jetcron_services.api import service
from jetcron_services.api.admission import Admission
from jetcron_services.api.call import Call
from jetcron_services.api.jobs import Jobs
from jetcron_services.api.registry import Handler, served
from jetcron_services.gateway.app import build_app
from jetcron_services.gateway.gate import Gate
from jetcron_services.runtime import Context

T0 = datetime(2026, 12, 1, tzinfo=UTC)


@dataclass
class Asked:
    """Every API request the gateway made: (verb, payload), in order."""

    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def of(self, verb: str) -> list[dict[str, Any]]:
        return [payload for name, payload in self.calls if name == verb]


class TwinApi(Client):
    """A tenant's (None: the admin's) SDK client answered by the api's handlers in this process, as the api service
    answers over NATS: the reply encoded with every field, an error as the API's error reply."""

    def __init__(self, verbs: dict[str, Handler], tenant: str | None, asked: Asked) -> None:
        super().__init__(rpc=MemoryRpc(), tenant=tenant)
        self.verbs, self.asked = verbs, asked

    async def call(self, verb: str, payload: dict[str, Any] | None = None) -> Any:
        self.asked.calls.append((verb, msgspec.to_builtins(payload or {})))
        try:
            result = await self.verbs[verb](Call(encode(payload or {}), self.tenant))
        except Exception as exc:
            reply = error_reply(exc)
            assert reply.error is not None
            raise api_error(reply.error) from None
        return msgspec.json.decode(encode(with_defaults(Reply(ok=True, result=result))))["result"]


@dataclass
class Gateway:
    http: AsyncTestClient[Any]
    ctx: Context
    api: dict[str, Handler]
    """The api's verbs, to make what a test needs as the api would."""
    asked: Asked
    tokens: dict[str | None, str]
    """A bearer token per tenant (None: the admin's)."""

    def headers(self, tenant: str | None) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.tokens[tenant]}"}

    async def as_api(self, verb: str, payload: dict[str, Any], tenant: str | None = None) -> Any:
        return await self.api[verb](Call(encode(payload), tenant))


@contextlib.asynccontextmanager
async def gateway(tenants: tuple[str, ...] = ("acme",)) -> AsyncIterator[Gateway]:
    """The gateway app over the api on twins, with a token for each of `tenants` and the admin's."""
    ctx = twin_context()
    verbs = served(service.nouns(ctx, Jobs(ctx, Admission(ctx))))
    asked = Asked()
    records: dict[str, TokenRecord] = {}
    tokens: dict[str | None, str] = {}
    for tenant in (*tenants, None):
        token, record = issue(tenant, tenant or "admin", T0)
        records[record.token_id], tokens[tenant] = record, token
    gate = Gate(lookup=records.get, client=lambda tenant: TwinApi(verbs, tenant, asked), ready=lambda: None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        app = build_app(gate)
    async with AsyncTestClient(app, base_url="http://gw.local") as http:
        yield Gateway(http=http, ctx=ctx, api=verbs, asked=asked, tokens=tokens)


def problem_of(response: httpx.Response) -> dict[str, Any]:
    assert response.headers["content-type"].startswith("application/problem+json"), response.text
    body: dict[str, Any] = response.json()
    return body

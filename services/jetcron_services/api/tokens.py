"""Token verbs (admin only): create, list, revoke the HTTP gateway's bearer tokens.

A token is answered once, by create; the bucket keeps only its digest, and list shows ids, tenants and labels.
Revoking deletes the record: every gateway replica watches the bucket and refuses the token from then on.
"""

from __future__ import annotations

from jetcron.auth.tokens import TOKEN_ID_RE, TokenRecord, issue
from jetcron.bus.ports import Records
from jetcron.core.errors import InvalidSpec, NotFound
from jetcron.core.ids import TENANT_RE
from jetcron.wire import subjects as s
from jetcron.wire import verbs as v
from jetcron_services.api.call import Call
from jetcron_services.api.ports import TokensPorts
from jetcron_services.api.registry import Noun, verb
from jetcron_services.api.requests import body, text


def _shown(record: TokenRecord, token: str | None = None) -> v.TokenInfo:
    return v.TokenInfo(token_id=record.token_id, tenant=record.tenant, admin=record.tenant is None, name=record.name,
                       created_at=record.created_at, token=token)


class Tokens(Noun):
    noun = "tokens"

    def __init__(self, ctx: TokensPorts) -> None:
        self.ctx = ctx
        self.store: Records[TokenRecord] | None = None

    async def _store(self) -> Records[TokenRecord]:
        if self.store is None:
            self.store = await self.ctx.buckets.open(s.BUCKET_TOKENS, TokenRecord)
        return self.store

    @verb
    async def create(self, call: Call) -> v.TokenInfo:
        req = body(call.data, v.TokensCreate)
        tenant = text(req, "tenant")
        admin = req.get("admin", False)
        if not isinstance(admin, bool):
            raise InvalidSpec("admin", admin, "must be true or false")
        if admin == (tenant is not None):
            raise InvalidSpec("tenant", tenant, "name exactly one of: a tenant, or admin: true")
        if tenant is not None and not TENANT_RE.fullmatch(tenant):
            raise InvalidSpec("tenant", tenant, "must be 1-63 letters, digits, '-' or '_'")
        name = text(req, "name", default="", limit=128) or ""
        token, record = issue(tenant, name, self.ctx.clock.now())
        await (await self._store()).create(record.token_id, record)
        return _shown(record, token)

    @verb
    async def list(self, call: Call) -> v.TokenList:
        req = body(call.data, v.ForTenant)
        tenant = text(req, "tenant")
        store = await self._store()
        items = []
        for key in sorted(await store.keys()):
            found = await store.maybe(key)
            if found is not None and (tenant is None or found[0].tenant == tenant):
                items.append(_shown(found[0]))
        return v.TokenList(items=items)

    @verb
    async def revoke(self, call: Call) -> v.TokenRevoked:
        req = body(call.data, v.TokensRevoke)
        token_id = text(req, "token_id")
        if token_id is None or not TOKEN_ID_RE.fullmatch(token_id):
            raise InvalidSpec("token_id", token_id, "is not a token id (16 hex digits; see tokens list)")
        store = await self._store()
        if await store.maybe(token_id) is None:
            raise NotFound("token", token_id)
        await store.delete(token_id)
        return v.TokenRevoked(token_id=token_id, revoked=True)

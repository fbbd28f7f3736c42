"""Secret verbs: set, list, delete. A value goes in and is never answered back: replies carry names only."""

from __future__ import annotations

from typing import Any

from jetcron.core.errors import InvalidSpec
from jetcron.core.ids import TENANT_RE
from jetcron.core.validate import validate_secrets
from jetcron.ops.secrets import Secrets as Store
from jetcron.wire import verbs as v
from jetcron_services.api.call import Call
from jetcron_services.api.ports import SecretsPorts
from jetcron_services.api.registry import Noun, verb
from jetcron_services.api.requests import body, text

MAX_VALUE = 64 * 1024


def _tenant(call: Call, req: dict[str, Any]) -> str:
    """The caller's own tenant; the admin names one."""
    if call.tenant is not None:
        if req.get("tenant", call.tenant) != call.tenant:
            raise InvalidSpec("tenant", req["tenant"], f"is set by your credential (tenant {call.tenant!r})")
        return call.tenant
    tenant = text(req, "tenant")
    if tenant is None or not TENANT_RE.fullmatch(tenant):
        raise InvalidSpec("tenant", tenant, "is required (1-63 letters, digits, '-' or '_')")
    return tenant


def _name(req: dict[str, Any]) -> str:
    name = text(req, "name", limit=128)
    if name is None:
        raise InvalidSpec("name", None, "is required")
    try:
        validate_secrets([name], {})
    except InvalidSpec as exc:
        raise InvalidSpec("name", name, exc.problem) from None
    return name


class Secrets(Noun):
    noun = "secrets"

    def __init__(self, ctx: SecretsPorts) -> None:
        self.ctx = ctx
        self.store = Store(ctx.publisher, ctx.streams, ctx.settings.secrets_key_file)

    @verb
    async def set(self, call: Call) -> v.SecretRef:
        req = body(call.data, v.SecretsSet)
        tenant, name = _tenant(call, req), _name(req)
        value = req["value"]
        if not isinstance(value, str) or len(value) > MAX_VALUE or "\x00" in value:
            # the value itself is never echoed in an error
            raise InvalidSpec("value", "(hidden)", f"must be a string of at most {MAX_VALUE} characters without NUL")
        await self.store.put(tenant, name, value)
        return v.SecretRef(tenant=tenant, name=name, updated_at=self.ctx.clock.now())

    @verb
    async def list(self, call: Call) -> v.SecretNames:
        req = body(call.data, v.ForTenant)
        tenant = _tenant(call, req)
        return v.SecretNames(tenant=tenant, items=await self.store.names(tenant))

    @verb
    async def delete(self, call: Call) -> v.SecretRef:
        req = body(call.data, v.SecretsDelete)
        tenant, name = _tenant(call, req), _name(req)
        await self.store.delete(tenant, name)
        return v.SecretRef(tenant=tenant, name=name, deleted=True)

"""A run's secrets, resolved on this host as its process starts: from a file here, else the tenant's store."""

from __future__ import annotations

from jetcron.core.errors import JetcronError, NotFound
from jetcron.core.models import JobSpec
from jetcron.ops.secrets import Secrets, from_file
from jetcron_services.agent.ports import ResolveSecretsPorts


async def resolve_secrets(ctx: ResolveSecretsPorts, spec: JobSpec) -> tuple[dict[str, str], str]:
    """The values by name, or ({}, why not): the reason names the secret, never a value."""
    store = Secrets(ctx.publisher, ctx.streams, ctx.settings.secrets_key_file)
    values: dict[str, str] = {}
    for name in spec.secrets:
        found = from_file(ctx.settings.agent_secrets_dir, spec.tenant, name)
        if found is None:
            try:
                found = await store.get(spec.tenant, name)
            except NotFound:
                return {}, f"secret {name} of tenant {spec.tenant} is not set (jetcron secrets set {name})"
            except JetcronError as exc:
                return {}, f"secret {name}: {exc}"
        values[name] = found
    return values, ""

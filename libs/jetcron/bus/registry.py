"""Service instances: each announces itself (metrics URL) in the services bucket and answers $SRV.PING."""

from __future__ import annotations

import contextlib

from nats import micro
from nats.js import JetStreamContext
from nats.micro.service import Service

from jetcron.bus.handles import Connection
from jetcron.bus.kv import Store
from jetcron.core.errors import JetcronError
from jetcron.wire import subjects as s
from jetcron.wire.messages import ServiceInstance


class Registry:
    """The services bucket: a key per instance that ages out when its heartbeats stop."""

    def __init__(self, store: Store[ServiceInstance]) -> None:
        self.store = store

    @classmethod
    async def open(cls, js: JetStreamContext) -> Registry:
        return cls(await Store.open(js, s.BUCKET_SERVICES, ServiceInstance))

    async def announce(self, instance: ServiceInstance) -> None:
        """Write (or refresh) this instance's entry; each write resets the bucket's max_age for it."""
        await self.store.put(s.service_key(instance.service, instance.instance), instance)

    async def withdraw(self, instance: ServiceInstance) -> None:
        """A clean stop removes the entry at once rather than after the TTL."""
        with contextlib.suppress(Exception):
            await self.store.kv.delete(s.service_key(instance.service, instance.instance))

    async def instances(self) -> list[ServiceInstance]:
        found: list[ServiceInstance] = []
        for key in await self.store.keys():
            with contextlib.suppress(JetcronError):
                entry = await self.store.maybe(key)
                if entry is not None:
                    found.append(entry[0])
        return sorted(found, key=lambda i: (i.service, i.instance))


async def add_ping_service(nc: Connection, instance: ServiceInstance, version: str) -> Service:
    """A nats.micro service with no endpoints: `$SRV.PING`, `$SRV.INFO` and `$SRV.STATS` answer for it."""
    return await micro.add_service(
        nc, name=s.health_service_name(instance.service), version=version,
        description=f"jetcron {instance.service} instance {instance.instance}",
        metadata={"instance": instance.instance, "host": instance.host, "metrics_url": instance.metrics_url})

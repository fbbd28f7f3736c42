"""ports.Link on a nats-py connection: what a service's runtime does with its own connection."""

from __future__ import annotations

from functools import cached_property

from jetcron.bus import rpc
from jetcron.bus.handles import Connection, ConnectionClosed, JetStream
from jetcron.bus.ports import Endpoints, ServiceRegistry
from jetcron.bus.registry import Registry, add_ping_service
from jetcron.bus.topology import missing_parts
from jetcron.wire.messages import ServiceInstance


class NatsLink:
    def __init__(self, nc: Connection) -> None:
        self.nc = nc

    @cached_property
    def js(self) -> JetStream:
        return rpc.jetstream(self.nc, timeout=10)

    def connected(self) -> bool:
        return rpc.is_connected(self.nc)

    def closed(self, exc: BaseException) -> bool:
        return isinstance(exc, ConnectionClosed)

    async def missing_parts(self) -> list[str]:
        return await missing_parts(self.nc, self.js)

    async def registry(self) -> ServiceRegistry:
        return await Registry.open(self.js)

    async def answer_pings(self, instance: ServiceInstance, version: str) -> Endpoints:
        return await add_ping_service(self.nc, instance, version)

    async def close(self, *, drain: float | None, timeout: float) -> bool:
        return await rpc.close(self.nc, drain=drain, timeout=timeout)

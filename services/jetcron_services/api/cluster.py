"""Cluster verbs (admin only): who leads, who holds the trigger shards, the placement queue."""

from __future__ import annotations

from jetcron.ops.overview import cluster_status
from jetcron.wire import verbs as v
from jetcron.wire.api import ClusterStatus
from jetcron_services.api.call import Call
from jetcron_services.api.ports import ClusterPorts
from jetcron_services.api.registry import Noun, verb
from jetcron_services.api.requests import body


class Cluster(Noun):
    noun = "cluster"

    def __init__(self, ctx: ClusterPorts) -> None:
        self.ctx = ctx

    @verb
    async def status(self, call: Call) -> ClusterStatus:
        body(call.data, v.Empty)
        return await cluster_status(self.ctx.leases, self.ctx.buckets, self.ctx.streams)

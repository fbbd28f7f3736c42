"""Leases with fencing over a lease log: the claims on runs, leaders and shards, and each agent's own lease."""

from __future__ import annotations

from nats.js import JetStreamContext

from jetcron.bus.lease._agents import AgentLeases
from jetcron.bus.lease._claims import Claims
from jetcron.bus.lease._server import ServerLeaseLog


class Leases(Claims, AgentLeases):
    """Acquire, renew, release and revoke leases with fencing, over a LeaseLog (the server's, or the twin's in
    jetcron.bus.memory): every write is revision-checked and carries its TTL, and the storage's clock judges expiry."""


def on_server(js: JetStreamContext) -> Leases:
    """Leases kept in the server's lease buckets."""
    return Leases(ServerLeaseLog(js))

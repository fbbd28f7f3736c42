"""Leases with fencing: a KV key whose revision is the token, expiry judged by the server (Nats-TTL)."""

from __future__ import annotations

from jetcron.bus.lease._claims import RELEASED_TTL
from jetcron.bus.lease._held import HeldLease
from jetcron.bus.lease._leases import Leases, on_server
from jetcron.bus.lease._server import ServerLeaseLog
from jetcron.bus.lease._values import Lease, LeaseValue, Stop, unclaimed

__all__ = ["RELEASED_TTL", "HeldLease", "Lease", "LeaseValue", "Leases", "ServerLeaseLog", "Stop", "on_server",
           "unclaimed"]

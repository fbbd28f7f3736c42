"""nats-py's own handles, named once: the bus's adapters, and the composition roots that build the ports from a
connection (the services' runtime, the SDK's Client, the CLI), hold them. A service names the ports
(jetcron.bus.ports), never these."""

from __future__ import annotations

import nats.errors
from nats.aio.client import Client
from nats.js import JetStreamContext

Connection = Client
"""A connection to NATS, as bus.connect made it."""

JetStream = JetStreamContext
"""A JetStream context of a Connection."""

ConnectionClosed = nats.errors.ConnectionClosedError
"""What a use of a Connection raises once it is closed."""

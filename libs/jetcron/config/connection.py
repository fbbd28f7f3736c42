"""Settings: the NATS cluster a process connects to, and as whom."""

from __future__ import annotations

from pydantic import Field

from jetcron.bus.connect import Identity
from jetcron.config.group import SettingsGroup


class ConnectionSettings(SettingsGroup):
    """Where the NATS servers are, how this process proves who it is to them, and how much they must keep safe."""

    nats_url: str = "nats://127.0.0.1:4222"
    """NATS server URL; several, comma-separated, for a cluster."""
    nats_monitor_url: str | None = None
    """Where to read /varz and /jsz to check fsync; default: the NATS host on port 8222."""
    nats_ping_interval: float = Field(default=2.0, gt=0)
    """Seconds between this process's pings to its NATS server: a server that answers none of three in a row
    (frozen, or behind a link that drops packets without a reset) is left and reconnected to, and the process says
    so (/readyz, jetcron_nats_connected)."""
    allow_unsafe_storage: bool = False
    """Accept a server that acknowledges writes before fsync (throwaway dev setups only)."""
    nats_creds: str | None = None
    """A NATS credentials file (user JWT and seed) for this process's role; `jetcron up` writes one per role."""
    nats_tls_ca: str | None = None
    """PEM file of the CA that signed the NATS server's certificate: set it to connect over TLS and verify it."""
    nats_tls_cert: str | None = None
    """Client certificate (PEM) for servers that verify clients; needs nats_tls_key."""
    nats_tls_key: str | None = None
    """Private key (PEM) of nats_tls_cert."""
    replicas: int | None = None
    """Stream and bucket replicas; default 1 on one node, 3 on a cluster."""

    @property
    def identity(self) -> Identity:
        return Identity(creds=self.nats_creds, tls_ca=self.nats_tls_ca, tls_cert=self.nats_tls_cert,
                        tls_key=self.nats_tls_key)

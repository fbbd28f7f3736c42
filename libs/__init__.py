"""jetcron: a distributed job scheduler on NATS JetStream."""

from jetcron.sdk.once import once

__all__ = ["once"]
__version__ = "0.1.0"

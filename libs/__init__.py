"""jetcron: a distributed job scheduler on NATS JetStream."""

from jetcron.sdk import checkpoint
from jetcron.sdk.once import once

__all__ = ["checkpoint", "once"]
__version__ = "0.1.0"

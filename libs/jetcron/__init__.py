"""jetcron: a distributed job scheduler on NATS JetStream."""

from __future__ import annotations

from typing import Any

__all__ = ["checkpoint", "once"]
__version__ = "0.1.0"
"""The release: the package's metadata reads it (pyproject.toml), the services announce it, and the deploy files'
image tags name it (tests/unit/test_version_tags.py)."""


def __getattr__(name: str) -> Any:
    # `jetcron.once` and `jetcron.checkpoint` for jobs, imported on first use: `import jetcron.core` (and every
    # pure module) must not load nats with them.
    if name == "once":
        from jetcron.sdk.once import once

        return once
    if name == "checkpoint":
        from jetcron.sdk import checkpoint

        return checkpoint
    raise AttributeError(f"module 'jetcron' has no attribute {name!r}")

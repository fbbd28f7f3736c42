"""Signalling a child's process group, which may already be gone or, after a user switch, not ours to signal."""

from __future__ import annotations

import contextlib
import os


def kill_group(pgid: int, sig: int) -> bool:
    """Send `sig` to the group; True if it was sent."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)
        return True
    return False

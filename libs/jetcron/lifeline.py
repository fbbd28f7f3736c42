"""Children that end with the process that started them, however it ends (kill -9 and the OOM killer included).

Linux's parent-death signal (prctl PR_SET_PDEATHSIG) is set in the child between fork and exec, so a child is never
left running after its parent is gone: it gets SIGTERM, and stops as it would at a Ctrl-C. The signal follows the
*thread* that forked, so only a parent that starts its children from its main thread, and keeps it, may use it
(`jetcron up` does; tests that start servers from worker threads do not).
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from collections.abc import Callable

_PR_SET_PDEATHSIG = 1


def ends_with(parent: int) -> Callable[[], None] | None:
    """A preexec_fn for subprocess.Popen: the child gets SIGTERM when `parent` (the caller's pid) dies, and ends at
    once if it already has (it died between the fork and this call). None where the platform has no such signal."""
    if not sys.platform.startswith("linux"):
        return None
    libc = ctypes.CDLL(None, use_errno=True)

    def arm() -> None:
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        if os.getppid() != parent:
            os.kill(os.getpid(), signal.SIGTERM)

    return arm

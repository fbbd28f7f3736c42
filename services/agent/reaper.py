"""A per-agent reaper process: when the agent dies (even by kill -9), it kills every child process group.

The agent writes "+PGID" and "-PGID" lines to the reaper's stdin. When that pipe closes (the kernel
closes it when the agent dies, however it dies) or the reaper gets SIGTERM (PR_SET_PDEATHSIG), it
sends SIGKILL to every process group it still knows and exits. One small process per agent rather
than a supervisor per run keeps spawning cheap.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys


def _set_parent_death_signal(sig: int) -> None:
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, sig)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _kill_all(groups: set[int]) -> None:
    for pgid in groups:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def main() -> None:
    groups: set[int] = set()

    def on_term(_sig: int, _frame: object) -> None:
        _kill_all(groups)
        os._exit(0)

    signal.signal(signal.SIGTERM, on_term)
    _set_parent_death_signal(signal.SIGTERM)
    for line in sys.stdin:
        line = line.strip()
        if line.startswith("+"):
            groups.add(int(line[1:]))
        elif line.startswith("-"):
            groups.discard(int(line[1:]))
    _kill_all(groups)


if __name__ == "__main__":
    main()

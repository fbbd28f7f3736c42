"""A per-agent reaper process: when the agent dies (even by kill -9), it kills every child process group.

The agent writes "+PGID" and "-PGID" lines (and "+c NAME", "-c NAME" for containers) to the reaper's
stdin. When that pipe closes (the kernel closes it when the agent dies, however it dies) or the reaper
gets SIGTERM (PR_SET_PDEATHSIG), it sends SIGKILL to every process group it still knows, removes the
containers (`--runtime PATH rm -f`), kills what is left in the agent's cgroups and removes them
(`--cgroup DIR`, repeatable), and exits. One small process per agent rather than a supervisor per run
keeps spawning cheap.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time


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


def _remove_containers(runtime: str | None, names: set[str]) -> None:
    if runtime and names:
        try:
            subprocess.run([runtime, "rm", "-f", *sorted(names)], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, timeout=30, check=False)
        except (OSError, subprocess.TimeoutExpired):
            pass


def _remove_cgroups(dirs: list[str]) -> None:
    """The agent's own groups: its run groups first (killing any member left), then the group itself."""
    for base in dirs:
        try:
            runs = [os.path.join(base, d) for d in os.listdir(base) if os.path.isdir(os.path.join(base, d))]
        except OSError:
            continue
        for group in [*runs, base]:
            for _ in range(20):
                try:
                    with open(os.path.join(group, "cgroup.procs")) as f:
                        for pid in f.read().split():
                            try:
                                os.kill(int(pid), signal.SIGKILL)
                            except (ProcessLookupError, PermissionError, ValueError):
                                pass
                    os.rmdir(group)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.05)  # members still being reaped


def main() -> None:
    args = sys.argv[1:]
    runtime = args[args.index("--runtime") + 1] if "--runtime" in args else None
    cgroups = [args[i + 1] for i, a in enumerate(args[:-1]) if a == "--cgroup"]
    groups: set[int] = set()
    containers: set[str] = set()

    def finish() -> None:
        _kill_all(groups)
        _remove_containers(runtime, containers)
        _remove_cgroups(cgroups)

    def on_term(_sig: int, _frame: object) -> None:
        finish()
        os._exit(0)

    signal.signal(signal.SIGTERM, on_term)
    _set_parent_death_signal(signal.SIGTERM)
    for line in sys.stdin:
        line = line.strip()
        if line.startswith(("+c ", "-c ")):
            (containers.add if line[0] == "+" else containers.discard)(line[3:])
        elif line.startswith("+"):
            groups.add(int(line[1:]))
        elif line.startswith("-"):
            groups.discard(int(line[1:]))
    finish()


if __name__ == "__main__":
    main()

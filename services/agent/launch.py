"""How a child is set up before its program runs: die with the agent (PR_SET_PDEATHSIG), join the run's cgroups
or take its rlimits.

A Python preexec_fn would do it all, but it forces fork() of the whole agent and runs Python in the child: 5 to
10 times slower per spawn than the vfork Python uses otherwise (measured: ~80 vs ~300 spawns/s with this prefix
here). So the agent execs small tools in front of the program instead, each of which sets one thing up and then
execs the next: `setpriv --pdeathsig KILL`, then `sh -c` writing its own pid into the cgroups (so the program
starts inside them; nothing it forks can escape) or `prlimit`, then `setpriv --reuid --regid --clear-groups`
to drop to the job's user (last: joining cgroups needs root), then the program itself with its argv untouched.
The pid stays the same through every exec, so the program still leads its own process group. Where the tools
are missing, the preexec_fn does the same. An idle agent mostly skips all this: a spare child already in its
groups takes the run (spares.py).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import signal
import subprocess
from collections.abc import Callable
from functools import cache

from jetcron.services.agent.limits import RLIMIT_AS_FACTOR, RunLimits

# Join every cgroup named before the program (a count, then that many cgroup.procs paths), then exec it.
JOIN = 'n=$1; shift; while [ "$n" -gt 0 ]; do echo $$ > "$1" || exit 125; shift; n=$((n-1)); done; exec "$@"'
JOIN_FAILED = 125


@cache
def _tools() -> tuple[str | None, str | None, str | None]:
    setpriv = shutil.which("setpriv")
    if setpriv is not None:
        try:
            done = subprocess.run([setpriv, "--pdeathsig", "KILL", "--", "true"], capture_output=True, timeout=5,
                                  check=False)
        except (OSError, subprocess.TimeoutExpired):
            setpriv = None
        else:
            setpriv = setpriv if done.returncode == 0 else None  # too old for --pdeathsig
    return setpriv, shutil.which("prlimit"), shutil.which("sh")


def setpriv_path() -> str | None:
    """setpriv, if this host has one that knows --pdeathsig."""
    return _tools()[0]


def resolve(program: str, env: dict[str, str]) -> str | None:
    """The program's path as exec would find it with the job's PATH, or None (not there, not executable)."""
    if "/" in program:
        return program if os.access(program, os.X_OK) and not os.path.isdir(program) else None
    return shutil.which(program, path=env.get("PATH", os.defpath))


def _preexec(limits: RunLimits | None, user: tuple[int, int] | None) -> Callable[[], None]:
    """The slow path, in the child between fork and exec."""

    def setup() -> None:
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: the child dies with the agent
        if limits is not None:
            limits.enter()
        if user is not None:  # last: joining the run's cgroups needs the agent's privileges
            os.setgroups([])
            os.setgid(user[1])
            os.setuid(user[0])

    return setup


def command(argv: list[str], limits: RunLimits | None,
            user: tuple[int, int] | None = None) -> tuple[list[str], Callable[[], None] | None]:
    """The argv to spawn (tools in front of the program's own) and a preexec_fn if the tools are missing.
    `user`: (uid, gid) the program runs as, switched to after the cgroups are joined (that needs root)."""
    setpriv, prlimit, sh = _tools()
    if setpriv is None:
        return argv, _preexec(limits, user)
    prefix = [setpriv, "--pdeathsig", "KILL", "--"]
    if limits is not None and limits.groups:
        if sh is None:
            return argv, _preexec(limits, user)
        procs = [str(g / "cgroup.procs") for g in limits.groups]
        prefix += [sh, "-c", JOIN, "jetcron-join", str(len(procs)), *procs]
    elif limits is not None:
        if prlimit is None:
            return argv, _preexec(limits, user)
        memory = [] if limits.memory_mb is None else [f"--as={limits.memory_mb * RLIMIT_AS_FACTOR * 1024 * 1024}"]
        prefix += [prlimit, *memory, f"--nproc={limits.max_pids}", "--"]
    return [*prefix, *_switch_user(setpriv, user), *argv], None


def _switch_user(setpriv: str, user: tuple[int, int] | None) -> list[str]:
    """The tool in front of the program that drops to the job's user (nothing: it runs as the agent's)."""
    return [] if user is None else [setpriv, f"--reuid={user[0]}", f"--regid={user[1]}", "--clear-groups", "--"]

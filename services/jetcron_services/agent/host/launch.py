"""How a child is set up before its program runs, in the child itself: die with the agent (PR_SET_PDEATHSIG), join
the run's cgroups or take its rlimits, a mount namespace of its own with its scratch bound over /tmp, the file size
bound, the switch to the job's user; then the program, with the job's environment and its argv untouched.

One program does every step, exec'd in front of the run's program (the pid stays, so the program still leads its
own process group): `jetcron-launch`, a static binary (jetcron_launch.c; make and the image build it), or where it
is not built, its twin in Python (jetcron_launch.py: the same command line, steps, messages and exit codes), run by
this interpreter as `python -I -S`. A preexec_fn would do the same in the forked agent, but it forces fork() of the
whole agent and runs Python in the child: 5 to 10 times slower per spawn than the vfork Python uses otherwise.
`JETCRON_AGENT_LAUNCHER=false` takes the twin even where the binary is built.

Neither ever sees the job's environment while it is root: a variable read by a dynamic loader, libc or an
interpreter (LD_PRELOAD, GCONV_PATH, LOCPATH, GLIBC_TUNABLES, PYTHONPATH, ...) would make a root process load or
run what the job names. It starts with an empty environment, and the job's reaches it on the child's stdin
(NAME=value items, NUL-separated), never a command line, where other users could read it; it points stdin at
/dev/null and execs the program with exactly that environment. The switch drops every capability the job's user
would otherwise keep (an agent that is not root but holds CAP_SETUID passes its ambient capabilities on through a
uid change). A spare child (spares.py) is the same program with `--spare`: the steps before the switch ahead of
its run, the rest once the run comes on its stdin.

The binary costs about a millisecond of CPU per run; the twin an interpreter's start more
(docs/decisions-job-view.md).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from jetcron.core.host.job_view import ChildView
from jetcron_services.agent.host import jetcron_launch
from jetcron_services.agent.host.limits import RLIMIT_AS_FACTOR, RunLimits

LAUNCHER = "jetcron-launch"
TWIN = Path(jetcron_launch.__file__)
"""jetcron-launch's twin in Python (it imports nothing of jetcron's)."""
TWIN_MAIN = "import sys; sys.path.append(sys.argv.pop(1)); import jetcron_launch; jetcron_launch.main(sys.argv)"
"""How the twin is run: imported from its folder (last on the path, after the standard library's), so that its
compiled code is read from its __pycache__ rather than compiled again at every run (about 3 ms of CPU)."""


@dataclass(frozen=True)
class Spawn:
    """How to start a child: its argv, its environment (empty: the launcher is root until its last step), and what
    its stdin is given (the program's environment, for the launcher to hand on)."""

    argv: list[str]
    env: dict[str, str]
    stdin: bytes


def encode_env(env: Mapping[str, str]) -> bytes:
    """The environment as the launcher reads it from stdin: NAME=value items, each ended by a NUL."""
    items = [f"{name}={value}" for name, value in env.items()]
    if any("\0" in item for item in items):
        raise ValueError("a NUL byte in the run's environment")
    return b"".join(item.encode() + b"\0" for item in items)


def launcher_argv(launcher: str | None) -> list[str]:
    """How the launcher is run: jetcron-launch by its path, or (None) its twin by this interpreter, isolated: no
    PYTHON* variable, no user site and no site (so no .pth file of this environment runs as root)."""
    return [launcher] if launcher is not None else [sys.executable, "-I", "-S", "-c", TWIN_MAIN, str(TWIN.parent)]


@cache
def launcher_path() -> str | None:
    """jetcron-launch beside this interpreter (make installs it in the virtual environment, the image in its own),
    else on PATH; None where it is missing or does not run here (then the twin is used)."""
    beside = Path(sys.executable).parent / LAUNCHER
    found = str(beside) if os.access(beside, os.X_OK) else shutil.which(LAUNCHER)
    true = shutil.which("true")
    if found is None or true is None:
        return None
    try:  # one built before --spare refuses it: the twin is used then
        done = subprocess.run([found, "--spare"], input=spare_run({}, [true]), capture_output=True, timeout=5,
                              check=False, env={})
    except (OSError, subprocess.TimeoutExpired):
        return None
    return found if done.returncode == 0 else None


def launcher_options(limits: RunLimits | None, user: tuple[int, int] | None, view: ChildView | None,
                     scratch: str | None) -> list[str]:
    """The launcher's options: the run's groups to join (or its rlimits where it has none), a private /tmp bound
    to its scratch, the file size bound, the user to switch to."""
    options: list[str] = []
    if limits is not None and limits.groups:
        for group in limits.groups:
            options += ["--join", str(group / "cgroup.procs")]
    elif limits is not None:
        if limits.memory_mb is not None:
            options += ["--as", str(limits.memory_mb * RLIMIT_AS_FACTOR * 1024 * 1024)]
        # Per user, not per run, and ignored for root: the weakest of the fallbacks (docs/guarantees.md).
        options += ["--nproc", str(limits.max_pids)]
    if view is not None and view.private_tmp and scratch is not None:
        options += ["--private-tmp", scratch]
    if view is not None and view.max_file_bytes:
        options += ["--fsize", str(view.max_file_bytes)]
    if user is not None:
        options += ["--user", f"{user[0]}:{user[1]}"]
    return options


def command(argv: list[str], env: Mapping[str, str], limits: RunLimits | None, user: tuple[int, int] | None = None,
            view: ChildView | None = None, scratch: str | None = None, launcher: str | None = None) -> Spawn:
    """How to spawn the program (`argv`, its environment `env`): the launcher in front of it, with an empty
    environment, handing the job's to the program alone through stdin. `user`: (uid, gid) the program runs as,
    switched to after the cgroups are joined (that needs root). `view` and `scratch`: a private /tmp bound to the
    scratch, and the file size bound (the caller starts the child in the scratch: its cwd). `launcher`:
    jetcron-launch's path (launcher_path()), or None for its twin."""
    options = launcher_options(limits, user, view, scratch)
    return Spawn([*launcher_argv(launcher), "--env-stdin", *options, "--", *argv], {}, encode_env(env))


def spare_command(limits: RunLimits, view: ChildView | None, scratch: str | None, launcher: str | None) -> list[str]:
    """A spare child (spares.py): the launcher with `--spare`, taking every step before the switch (its groups,
    and with a view its namespace, /tmp bound to its scratch and its file size bound), then waiting on its stdin
    for the run (spare_run)."""
    return [*launcher_argv(launcher), "--spare", *launcher_options(limits, None, view, scratch)]


def spare_run(env: Mapping[str, str], argv: list[str], user: tuple[int, int] | None = None, cwd: str = "") -> bytes:
    """What a spare reads from its stdin, each item ended by a NUL: the uid and gid to switch to (two empty items:
    none), the working directory (empty: none), the number of environment items, the items (NAME=value), then
    the argv."""
    ids = ["", ""] if user is None else [str(user[0]), str(user[1])]
    items = [*ids, cwd, str(len(env)), *(f"{k}={v}" for k, v in env.items()), *argv]
    if any("\0" in item for item in items):
        raise ValueError("a NUL byte in the run's environment or argv")
    return b"".join(item.encode() + b"\0" for item in items)


def resolve(program: str, env: dict[str, str]) -> str | None:
    """The program's path as exec would find it with the job's PATH, or None (not there, not executable). A
    relative path (`./backup.sh`) is found from the agent's working directory, as before jobs had a scratch of
    their own to start in, and made absolute, since the child starts in its scratch."""
    if "/" in program:
        return os.path.abspath(program) if os.access(program, os.X_OK) and not os.path.isdir(program) else None
    return shutil.which(program, path=env.get("PATH", os.defpath))

"""How a child is set up before its program runs: die with the agent (PR_SET_PDEATHSIG), join the run's cgroups
or take its rlimits.

A Python preexec_fn would do it all, but it forces fork() of the whole agent and runs Python in the child: 5 to
10 times slower per spawn than the vfork Python uses otherwise (measured: ~80 vs ~300 spawns/s with this prefix
here). So the agent execs small tools in front of the program instead, each of which sets one thing up and then
execs the next: `setpriv --pdeathsig KILL`, then `sh -c` writing its own pid into the cgroups (so the program
starts inside them; nothing it forks can escape) or `prlimit`, then `setpriv --reuid --regid --clear-groups`
to drop to the job's user (last: joining cgroups needs root), then a short perl program that gives the program
its environment (below) and execs it with its argv untouched. The pid stays the same through every exec, so the
program still leads its own process group. Where the tools (or perl) are missing, the preexec_fn does the same,
and the program is the one exec, with the job's environment. An idle agent mostly skips all this: a spare child
already in its groups takes the run (spares.py).

A job's view of the host (jetcron.core.job_view) adds two steps, both before the switch to the job's user: `unshare
--mount` (a mount namespace of its own, no fork) and, in the same `sh`, a bind of its scratch over /tmp and
`ulimit -f` (RLIMIT_FSIZE). `mount` is named by its full path and runs under `env -i`.

None of these helpers, which run as root, ever sees the job's environment: a variable read by a dynamic loader,
libc or a shell (LD_PRELOAD, GCONV_PATH, LOCPATH, GLIBC_TUNABLES, BASH_ENV, ...) would make a root process load
or run what the job names. They start with an empty environment, and the job's reaches the last step alone
through the child's stdin (NAME=value items, NUL-separated), never a command line, where other users could read
it: a short perl program (the chain's last exec, after the switch to the job's user) or jetcron-launch itself
(`--env-stdin`) reads it, points stdin at /dev/null and execs the program with exactly that environment. The
switch also drops every capability the job's user would otherwise keep (an agent that is not root but holds
CAP_SETUID passes its ambient capabilities on through a uid change).

Where `jetcron-launch` is built (make and the image build it from jetcron_launch.c), that one static binary takes
the place of the whole chain: it dies with the agent, joins the groups, makes the namespace and binds /tmp, sets
the rlimits and switches to the job's user itself, then execs the program. Each tool of the chain was an exec of
its own and cost about a millisecond of CPU (8.1 ms for the chain with a private /tmp and a user switch, against
1.1 ms through the launcher, `true` included: docs/decisions-job-view.md). `JETCRON_AGENT_LAUNCHER=false` keeps the
chain.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import resource
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from jetcron.core.job_view import PRIVATE_TMP, ChildView, fsize_blocks
from jetcron_services.agent.host.limits import RLIMIT_AS_FACTOR, RunLimits

# Join every cgroup named before the program (a count, then that many cgroup.procs paths); then, given `env` and
# `mount` by their paths and a scratch, bind the scratch over /tmp (in the mount namespace `unshare` made) and
# enter it; then, given a count of 512-byte blocks, limit the size of any file written; then exec the program.
SETUP = ('n=$1; shift; while [ "$n" -gt 0 ]; do echo $$ > "$1" || exit 125; shift; n=$((n-1)); done; '
         f'if [ -n "$3" ]; then "$1" -i "$2" -n --bind "$3" {PRIVATE_TMP} && cd {PRIVATE_TMP} || exit 125; fi; '
         'if [ -n "$4" ]; then ulimit -f "$4" || exit 125; fi; shift 4; exec "$@"')
JOIN_FAILED = 125
LAUNCHER = "jetcron-launch"
# The chain's last step, as the job's user: read the environment items from stdin (NUL-separated), point stdin at
# /dev/null, exec the program (its argv) with exactly that environment. Perl starts in the chain's empty
# environment, so nothing of the job's steers perl itself.
EXEC_WITH_ENV = r"""
$/ = "\0"; my @e = <STDIN>; chomp @e;
open(STDIN, "<", "/dev/null") or exit 125;
%ENV = map { split(/=/, $_, 2) } @e;
exec { $ARGV[0] } @ARGV or print STDERR "jetcron: could not start $ARGV[0]: $!\n";
exit 127;
"""
DROP_CAPS = ("--inh-caps=-all", "--ambient-caps=-all")
"""setpriv's options that leave the job's user no capability (the kernel clears them only on a switch from root)."""


@dataclass(frozen=True)
class Spawn:
    """How to start a child: its argv and environment, what its stdin is given (None: /dev/null), and a
    preexec_fn where the tools are missing."""

    argv: list[str]
    env: dict[str, str]
    stdin: bytes | None = None
    preexec: Callable[[], None] | None = None


def encode_env(env: Mapping[str, str]) -> bytes:
    """The environment as the last step reads it from stdin: NAME=value items, each ended by a NUL."""
    items = [f"{name}={value}" for name, value in env.items()]
    if any("\0" in item for item in items):
        raise ValueError("a NUL byte in the run's environment")
    return b"".join(item.encode() + b"\0" for item in items)


@cache
def _tools() -> tuple[str | None, str | None, str | None, str | None]:
    """setpriv (None: missing, too old for --pdeathsig or for dropping capabilities, or no perl to end the chain
    with), prlimit, sh and perl."""
    setpriv, perl, true = shutil.which("setpriv"), shutil.which("perl"), shutil.which("true")
    if setpriv is not None and perl is not None and true is not None:
        try:
            done = subprocess.run([setpriv, "--pdeathsig", "KILL", *DROP_CAPS, "--", true], capture_output=True,
                                  timeout=5, check=False, env={})
        except (OSError, subprocess.TimeoutExpired):
            setpriv = None
        else:
            setpriv = setpriv if done.returncode == 0 else None
    else:
        setpriv = None
    return setpriv, shutil.which("prlimit"), shutil.which("sh"), perl


@cache
def launcher_path() -> str | None:
    """jetcron-launch beside this interpreter (make installs it in the virtual environment, the image in its own),
    else on PATH; None where it is missing or does not run here (then the chain of tools is used)."""
    beside = Path(sys.executable).parent / LAUNCHER
    found = str(beside) if os.access(beside, os.X_OK) else shutil.which(LAUNCHER)
    true = shutil.which("true")
    if found is None or true is None:
        return None
    try:  # one built before --env-stdin refuses it: the chain is used then
        done = subprocess.run([found, "--env-stdin", "--", true], input=b"", capture_output=True, timeout=5,
                              check=False, env={})
    except (OSError, subprocess.TimeoutExpired):
        return None
    return found if done.returncode == 0 else None


def launcher_options(limits: RunLimits | None, user: tuple[int, int] | None, view: ChildView | None,
                     scratch: str | None) -> list[str]:
    """jetcron-launch's options for what the chain of tools would set up (command())."""
    options: list[str] = []
    if limits is not None and limits.groups:
        for group in limits.groups:
            options += ["--join", str(group / "cgroup.procs")]
    elif limits is not None:
        if limits.memory_mb is not None:
            options += ["--as", str(limits.memory_mb * RLIMIT_AS_FACTOR * 1024 * 1024)]
        options += ["--nproc", str(limits.max_pids)]
    if view is not None and view.private_tmp and scratch is not None:
        options += ["--private-tmp", scratch]
    if view is not None and view.max_file_bytes:
        options += ["--fsize", str(view.max_file_bytes)]
    if user is not None:
        options += ["--user", f"{user[0]}:{user[1]}"]
    return options


def setpriv_path() -> str | None:
    """setpriv, if this host has one that knows --pdeathsig."""
    return _tools()[0]


@cache
def _namespace_tools() -> tuple[str, str, str] | None:
    """unshare, env and mount: what a private /tmp takes (None: one is missing)."""
    found = (shutil.which("unshare"), shutil.which("env"), shutil.which("mount"))
    return None if None in found else found  # type: ignore[return-value]


def _sh_setup(procs: list[str], sh: str, view: ChildView | None, scratch: str | None, *,
              fsize: bool = True) -> list[str]:
    """`sh -c SETUP ...` joining `procs`, binding the scratch over /tmp where the view says, and limiting file
    sizes (unless `fsize` is False: prlimit did)."""
    tools = _namespace_tools()
    bind = scratch if view is not None and view.private_tmp and scratch is not None and tools else ""
    env_tool, mount = (tools[1], tools[2]) if tools else ("", "")
    blocks = str(fsize_blocks(view.max_file_bytes)) if fsize and view is not None and view.max_file_bytes else ""
    return [sh, "-c", SETUP, "jetcron-setup", str(len(procs)), *procs, env_tool, mount, bind, blocks]


def private_tmp_prefix() -> list[str]:
    """The tool that gives the child a mount namespace of its own (it execs the rest: the pid stays)."""
    tools = _namespace_tools()
    return [] if tools is None else [tools[0], "--mount", "--propagation", "private", "--"]


def spare_prefix(view: ChildView | None, scratch: str | None, launcher: str | None = None) -> list[str] | None:
    """What a spare child runs before its perl (spares.py): dying with the agent, then, with a view, its namespace,
    /tmp bound to its scratch and its file size limit. Through jetcron-launch (`launcher`) in one exec, else
    setpriv and the tools; None where neither is here."""
    if launcher is not None:
        return [launcher, *launcher_options(None, None, view, scratch), "--"]
    setpriv, _, sh, _ = _tools()
    if setpriv is None:
        return None
    prefix = [setpriv, "--pdeathsig", "KILL", "--"]
    if view is None or scratch is None or sh is None or not (view.private_tmp or view.max_file_bytes):
        return prefix
    return [*prefix, *(private_tmp_prefix() if view.private_tmp else []), *_sh_setup([], sh, view, scratch)]


def resolve(program: str, env: dict[str, str]) -> str | None:
    """The program's path as exec would find it with the job's PATH, or None (not there, not executable). A
    relative path (`./backup.sh`) is found from the agent's working directory, as before jobs had a scratch of
    their own to start in, and made absolute, since the child starts in its scratch."""
    if "/" in program:
        return os.path.abspath(program) if os.access(program, os.X_OK) and not os.path.isdir(program) else None
    return shutil.which(program, path=env.get("PATH", os.defpath))


def _preexec(limits: RunLimits | None, user: tuple[int, int] | None,
             max_file_bytes: int | None = None) -> Callable[[], None]:
    """The slow path, in the child between fork and exec (never with a private /tmp: that needs setpriv, sh and
    unshare, which the agent checks before it plans one)."""

    def setup() -> None:
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: the child dies with the agent
        if limits is not None:
            limits.enter()
        if max_file_bytes is not None:
            with contextlib.suppress(ValueError, OSError):
                resource.setrlimit(resource.RLIMIT_FSIZE, (max_file_bytes, max_file_bytes))
        if user is not None:  # last: joining the run's cgroups needs the agent's privileges
            os.setgroups([])
            os.setgid(user[1])
            os.setuid(user[0])
            _drop_capabilities()

    return setup


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def _drop_capabilities() -> None:
    """After the switch to the job's user: no ambient, inheritable, permitted or effective capability left (an
    agent that is not root keeps those it holds through a uid change). Raises OSError if they are not all gone:
    the child then does not start."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(47, 4, 0, 0, 0)  # PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL (EINVAL before Linux 4.3: none then)
    header, data = _CapHeader(0x20080522, 0), (_CapData * 2)()  # _LINUX_CAPABILITY_VERSION_3, this process
    if libc.capset(ctypes.byref(header), data) != 0 or libc.capget(ctypes.byref(header), data) != 0 \
            or any(d.effective or d.permitted or d.inheritable for d in data):
        raise OSError(ctypes.get_errno(), "could not drop the job user's capabilities")


def command(argv: list[str], env: Mapping[str, str], limits: RunLimits | None, user: tuple[int, int] | None = None,
            view: ChildView | None = None, scratch: str | None = None, launcher: str | None = None) -> Spawn:
    """How to spawn the program (`argv`, its environment `env`): through jetcron-launch or the tools in front of it,
    which get an empty environment and hand the job's to the program alone through stdin; or, where the tools are
    missing, the program itself with a preexec_fn. `user`: (uid, gid) the program runs as, switched to after the
    cgroups are joined (that needs root). `view` and `scratch`: a private /tmp bound to the scratch, and the file
    size limit (the caller starts the child in the scratch: its cwd). `launcher`: jetcron-launch's path
    (launcher_path()), or None for the tools."""
    if launcher is not None:
        return Spawn([launcher, "--env-stdin", *launcher_options(limits, user, view, scratch), "--", *argv], {},
                     encode_env(env))
    setpriv, prlimit, sh, perl = _tools()
    fsize = view.max_file_bytes if view is not None else None
    slow = Spawn(argv, dict(env), None, _preexec(limits, user, fsize))
    if setpriv is None or perl is None:
        return slow
    prefix = [setpriv, "--pdeathsig", "KILL", "--"]
    private = view is not None and view.private_tmp and scratch is not None
    if private:
        prefix += private_tmp_prefix()
    if limits is not None and limits.groups:
        if sh is None:
            return slow
        prefix += _sh_setup([str(g / "cgroup.procs") for g in limits.groups], sh, view, scratch)
    elif limits is not None:
        if prlimit is None:
            return slow
        memory = [] if limits.memory_mb is None else [f"--as={limits.memory_mb * RLIMIT_AS_FACTOR * 1024 * 1024}"]
        prefix += [prlimit, *memory, f"--nproc={limits.max_pids}", *([f"--fsize={fsize}"] if fsize else []), "--"]
        if private and sh is not None:
            prefix += _sh_setup([], sh, view, scratch, fsize=False)
    elif sh is not None and (private or fsize):
        prefix += _sh_setup([], sh, view, scratch)
    return Spawn([*prefix, *_switch_user(setpriv, user), perl, "-e", EXEC_WITH_ENV, "--", *argv], {},
                 encode_env(env))


def _switch_user(setpriv: str, user: tuple[int, int] | None) -> list[str]:
    """The tool in front of the program that drops to the job's user (nothing: it runs as the agent's)."""
    return [] if user is None else [setpriv, f"--reuid={user[0]}", f"--regid={user[1]}", "--clear-groups",
                                    *DROP_CAPS, "--"]

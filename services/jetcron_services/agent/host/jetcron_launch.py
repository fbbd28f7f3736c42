"""jetcron-launch in Python: the twin of jetcron_launch.c (its command line, its steps in their order, its messages
and its exit codes), which an agent runs where the C launcher is not built (a plain `pip install`).

    jetcron_launch.py [--env-stdin | --spare] [--join PROCS]... [--private-tmp DIR] [--fsize BYTES] [--as BYTES]
                      [--nproc N] [--user UID:GID] -- PROGRAM [ARG]...

The agent runs it with an empty environment (the job's comes on stdin) as `python -I -S -c ...` importing it from
its folder (launch.TWIN_MAIN): no PYTHON* variable, no user site and no site at all, so no .pth file of the
installed environment runs while it is root; it imports nothing but the standard library. It costs more CPU than
the static binary (an interpreter's start: docs/decisions-job-view.md), which is why an agent prefers that one
where it is built.

The launch path's exit codes and bounds are spelled here and nowhere else: jetcron_launch.c is compiled with the
flags `python3 jetcron_launch.py --c-defines` prints (the Makefile and the image's build stage do), and the
agent's Python imports them from this module.
"""

from __future__ import annotations

import ctypes
import errno
import os
import resource
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:  # for mypy alone: importing typing would add half again to this program's start
    from collections.abc import Mapping
    from typing import NoReturn

SETUP_FAILED = 125
"""A step before the program failed (a join, the namespace, a limit, the user switch): nothing of it ran."""
NOT_STARTED = 127
"""The program could not be exec'd (as a shell says of a command it cannot run)."""
MAX_JOINS = 8
"""--join at most this many times (a run joins two groups: memory and pids)."""
MAX_STDIN_BYTES = 64 << 20
"""The most stdin may hold: the environment, or a spare's run."""
DEFINES = {"SETUP_FAILED": SETUP_FAILED, "NOT_STARTED": NOT_STARTED, "MAX_JOINS": MAX_JOINS,
           "MAX_STDIN_BYTES": MAX_STDIN_BYTES}
"""What jetcron_launch.c takes from here, as -D flags (--c-defines)."""
NO_ID = 0xFFFFFFFF
"""(uid_t)-1, which setresuid and setresgid read as "leave this id as it is": never a job's."""

# Linux's numbers, the same on every architecture (<sys/prctl.h>, <sched.h>, <sys/mount.h>,
# <linux/capability.h>): neither os nor ctypes names them.
PR_SET_PDEATHSIG = 1
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
CLONE_NEWNS = 0x00020000
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
CAPABILITY_VERSION_3 = 0x20080522
LIMITS = ((resource.RLIMIT_FSIZE, "--fsize", "the file size limit"),
          (resource.RLIMIT_AS, "--as", "the address space limit"),
          (resource.RLIMIT_NPROC, "--nproc", "the process limit"))
"""The rlimits, in the order they are set."""

# CPython ignores SIGPIPE and SIGXFSZ from its start, and an ignored signal stays ignored through an exec: the
# program would not end on a closed pipe, nor on a write past its file size bound; so every signal is reset.
# `signal` imports enum, which costs as much as the rest of this program's start; its C half is always loaded and
# does what is needed here.
_signal = __import__("_signal")


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


class _Rlimit(ctypes.Structure):
    _fields_ = [("cur", ctypes.c_ulong), ("max", ctypes.c_ulong)]


class _Libc:
    """The calls the os module does not offer; each returns the errno of a failure, 0 for success."""

    def __init__(self) -> None:
        self.lib = ctypes.CDLL(None, use_errno=True)

    def _errno(self, result: int) -> int:
        return 0 if result == 0 else ctypes.get_errno() or errno.EIO

    def prctl(self, option: int, arg: int) -> int:
        zero = ctypes.c_ulong(0)
        return self._errno(self.lib.prctl(option, ctypes.c_ulong(arg), zero, zero, zero))

    def unshare(self, flags: int) -> int:
        return self._errno(self.lib.unshare(flags))

    def mount(self, source: bytes | None, target: bytes, flags: int) -> int:
        return self._errno(self.lib.mount(source, target, None, ctypes.c_ulong(flags), None))

    def setrlimit(self, resource_id: int, value: int) -> int:
        return self._errno(self.lib.setrlimit(resource_id, ctypes.byref(_Rlimit(value, value))))

    def capabilities(self, header: _CapHeader, data: ctypes.Array[_CapData], *, write: bool) -> int:
        return self._errno((self.lib.capset if write else self.lib.capget)(ctypes.byref(header), data))


def _say(line: str) -> None:
    os.write(2, os.fsencode(line + "\n"))


def fail(step: str, value: str, err: int) -> NoReturn:
    """A step failed: say which, on what and why, and exit before anything of the program runs."""
    _say(f"jetcron: could not {step} {value}: {os.strerror(err)}")
    os._exit(SETUP_FAILED)


def usage(option: str, why: str, value: str) -> NoReturn:
    _say(f"jetcron-launch: {option} {why}: {value}")
    os._exit(SETUP_FAILED)


def whole(text: str) -> int | None:
    """The number `text` spells in decimal digits alone (as jetcron_launch.c reads one), or None."""
    if not 0 < len(text) < 32 or not text.isascii() or not text.isdigit() or int(text) >= 1 << 64:
        return None
    return int(text)


def number(option: str, text: str, shown: str) -> int:
    parsed = whole(text)
    if parsed is None:
        usage(option, "is not a whole number", shown)
    return parsed


def ids_text(uid: str, gid: str) -> str:
    return f"uid {uid[:32]} gid {gid[:32]}"


def parse_user(text: str) -> tuple[int, int, str]:
    uid, colon, gid = text.partition(":")
    if not colon:
        usage("--user", "is not UID:GID", text)
    ids = number("--user", uid, text), number("--user", gid, text)
    if max(ids) >= NO_ID:
        usage("--user", "is out of range", text)
    return ids[0], ids[1], ids_text(uid, gid)


def die_with_parent(libc: _Libc) -> None:
    if err := libc.prctl(PR_SET_PDEATHSIG, 9):  # SIGKILL
        fail("set", "the parent-death signal", err)


def join(procs: str) -> None:
    pid = b"%d\n" % os.getpid()
    try:
        fd = os.open(procs, os.O_WRONLY | os.O_CLOEXEC)
        try:
            written = os.write(fd, pid)
        finally:
            os.close(fd)
    except OSError as exc:
        fail("join", procs, exc.errno or errno.EIO)
    if written != len(pid):
        fail("join", procs, errno.EIO)


def private_tmp(libc: _Libc, directory: str) -> None:
    if err := libc.unshare(CLONE_NEWNS):
        fail("make a mount namespace for", directory, err)
    # Nothing mounted here propagates back to the host's namespace.
    if err := libc.mount(None, b"/", MS_REC | MS_PRIVATE):
        fail("make the mounts private for", directory, err)
    if err := libc.mount(os.fsencode(directory), b"/tmp", MS_BIND):
        fail("bind over /tmp", directory, err)
    try:
        os.chdir("/tmp")
    except OSError as exc:
        fail("enter /tmp bound to", directory, exc.errno or errno.EIO)


def drop_capabilities(libc: _Libc, text: str) -> None:
    """No capability left to the job's user: the kernel clears them on a switch from root, not on one from an
    agent that is not root but holds CAP_SETUID (its ambient set would pass them on to the program)."""
    if (err := libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)) and err != errno.EINVAL:  # EINVAL: no ambient set
        fail("clear the ambient capabilities of", text, err)
    header, data = _CapHeader(CAPABILITY_VERSION_3, 0), (_CapData * 2)()
    if err := libc.capabilities(header, data, write=True):
        fail("drop the capabilities of", text, err)
    if err := libc.capabilities(header, data, write=False):
        fail("read the capabilities of", text, err)
    if any(d.effective or d.permitted or d.inheritable for d in data):
        fail("drop the capabilities of", text, errno.EPERM)


def switch_user(libc: _Libc, uid: int, gid: int, text: str, parent: int, shown: str) -> None:
    """No supplementary group, the real, effective and saved gid and uid, checked, no capability; then the
    parent-death signal again (a credential change clears it), with the parent checked: one that died before it
    was set again would never send it."""
    try:
        os.setgroups([])
    except OSError as exc:
        fail("clear the supplementary groups for", text, exc.errno or errno.EPERM)
    try:
        os.setresgid(gid, gid, gid)
    except OSError as exc:
        fail("switch to the group of", text, exc.errno or errno.EPERM)
    try:
        os.setresuid(uid, uid, uid)
    except OSError as exc:
        fail("switch to the user", text, exc.errno or errno.EPERM)
    if os.getresuid() != (uid, uid, uid) or os.getresgid() != (gid, gid, gid) or os.getgroups():
        fail("switch to", text, errno.EPERM)
    drop_capabilities(libc, text)
    die_with_parent(libc)
    if os.getppid() != parent:
        _say(f"jetcron: the process that launched {shown} is gone")
        os._exit(SETUP_FAILED)


def read_stdin(what: str) -> list[bytes]:
    """The items on stdin, read to its end, each ended by a NUL; then stdin is /dev/null."""
    chunks: list[bytes] = []
    size = 0
    while True:
        try:
            chunk = os.read(0, 1 << 16)
        except OSError as exc:
            fail("read", what, exc.errno or errno.EIO)
        if not chunk:
            break
        size += len(chunk)
        if size >= MAX_STDIN_BYTES:
            fail("read", what, errno.E2BIG)
        chunks.append(chunk)
    data = b"".join(chunks)
    if data and not data.endswith(b"\0"):
        fail("read", f"{what} (an item not ended by a NUL)", errno.EINVAL)
    try:
        null = os.open("/dev/null", os.O_RDONLY | os.O_CLOEXEC)
        os.dup2(null, 0)
        os.close(null)
    except OSError as exc:
        fail("point stdin at", "/dev/null", exc.errno or errno.EIO)
    return data.split(b"\0")[:-1]


def environment(items: list[bytes], what: str) -> dict[bytes, bytes]:
    """NAME=value items as exec passes them on (a name neither empty nor holding '=')."""
    env: dict[bytes, bytes] = {}
    for item in items:
        name, equals, value = item.partition(b"=")
        if not equals or not name:
            fail("read", f"{what} (an item that is not NAME=value)", errno.EINVAL)
        env[name] = value
    return env


def given_environment() -> dict[bytes, bytes]:
    """The environment this process was started with. Not os.environ: CPython adds LC_CTYPE to that where it
    starts in the C locale, and the program must get exactly what the launcher was given."""
    try:
        with open("/proc/self/environ", "rb") as given:
            return environment(given.read().split(b"\0")[:-1], "the environment given")
    except OSError as exc:
        fail("read", "the environment given", exc.errno or errno.EIO)


def start(program: list[bytes], env: Mapping[bytes, bytes]) -> NoReturn:
    # Every signal at its default and none blocked, whatever the agent was given, as the C launcher does (glibc
    # keeps 32 and 33 out of reach: they pass as they are).
    for signum in range(1, _signal.NSIG):
        if signum not in (_signal.SIGKILL, _signal.SIGSTOP):
            try:
                _signal.signal(signum, _signal.SIG_DFL)
            except (OSError, ValueError):
                pass
    _signal.pthread_sigmask(_signal.SIG_SETMASK, ())
    try:
        os.execve(program[0], program, env)
    except OSError as exc:
        _say(f"jetcron: could not start {os.fsdecode(program[0])}: {os.strerror(exc.errno or errno.EIO)}")
    os._exit(NOT_STARTED)


def main(argv: list[str]) -> NoReturn:
    """As jetcron_launch.c's main(): every option read and checked before the first step (a bad one changes
    nothing), then the steps, then the program."""
    mode = argv[1] if len(argv) > 1 and argv[1] in ("--env-stdin", "--spare") else None
    joins: list[str] = []
    tmp: str | None = None
    user: tuple[int, int, str] | None = None
    bounds: dict[str, int] = {}
    options = {option for _, option, _ in LIMITS}
    i = 1 if mode is None else 2
    while i < len(argv) and argv[i] != "--":
        option = argv[i]
        if i + 1 >= len(argv):
            usage(option, "needs", "a value")
        value = argv[i + 1]
        if option == "--join":
            if len(joins) == MAX_JOINS:
                usage(option, "is given more than", f"{MAX_JOINS} times")
            joins.append(value)
        elif option == "--private-tmp":
            if not value.startswith("/"):
                usage(option, "is not an absolute path", value)
            tmp = value
        elif option in options:
            bounds[option] = number(option, value, value)
        elif option == "--user" and mode == "--spare":
            usage(option, "is not taken with", "--spare (the run's user comes on stdin)")
        elif option == "--user":
            user = parse_user(value)
        else:
            usage("option", "is not known", option)
        i += 2
    program: list[bytes] = []
    if mode == "--spare":
        if i < len(argv):
            usage("--", "is not taken with", "--spare (the program comes on stdin)")
    else:
        if i + 1 >= len(argv):
            usage("--", "must be followed by", "the program")
        if not argv[i + 1].startswith("/"):
            usage("the program", "is not an absolute path", argv[i + 1])
        program = [os.fsencode(arg) for arg in argv[i + 1:]]

    env = environment(read_stdin("the environment from stdin"), "the environment from stdin") \
        if mode == "--env-stdin" else given_environment()
    libc = _Libc()
    die_with_parent(libc)
    parent = os.getppid()
    for procs in joins:
        join(procs)
    if tmp is not None:
        private_tmp(libc, tmp)
    for resource_id, option, name in LIMITS:
        if option in bounds and (err := libc.setrlimit(resource_id, bounds[option])):
            fail("set", name, err)
    if mode == "--spare":
        spare(libc, parent)
    if user is not None:
        switch_user(libc, *user, parent, os.fsdecode(program[0]))
    start(program, env)


def spare(libc: _Libc, parent: int) -> NoReturn:
    """A spare, in its groups, namespace and limits, waits for its run on stdin: the uid and gid (two empty items:
    no switch), the working directory (empty: stay), the number of environment items, the items, then the
    program and its arguments. It enters the directory as root (the job's user may not search the folders above
    it), switches, and starts the program. An empty stdin: the agent ended it unused."""
    what = "the run from stdin"
    items = read_stdin(what)
    if not items:
        os._exit(0)
    count = whole(items[3].decode("ascii", "replace")) if len(items) >= 5 else None
    if count is None or len(items) < 5 + count:
        fail("read", f"{what} (not a user, a directory, an environment and a program)", errno.EINVAL)
    uid, gid = (item.decode("ascii", "replace") for item in items[:2])
    cwd, env, program = items[2], environment(items[4:4 + count], what), items[4 + count:]
    if not program[0].startswith(b"/"):
        usage("the program", "is not an absolute path", os.fsdecode(program[0]))
    if cwd:
        try:
            os.chdir(cwd)
        except OSError as exc:
            fail("enter", os.fsdecode(cwd), exc.errno or errno.EIO)
    if uid or gid:
        ids = whole(uid), whole(gid)
        if ids[0] is None or ids[1] is None or max(ids[0], ids[1]) >= NO_ID:
            fail("switch to", ids_text(uid, gid), errno.EINVAL)
        switch_user(libc, ids[0], ids[1], ids_text(uid, gid), parent, os.fsdecode(program[0]))
    start(program, env)


if __name__ == "__main__":
    if sys.argv[1:] == ["--c-defines"]:
        print(" ".join(f"-D{name}={value}" for name, value in DEFINES.items()))
        sys.exit(0)
    main(sys.argv)

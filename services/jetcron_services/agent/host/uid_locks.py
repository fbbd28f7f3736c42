"""The job uids an agent gives out, each locked host-wide while an attempt holds it: a file per uid in the lock folder,
locked while its descriptor is open, so the lock ends with the agent whatever way it dies. Agents of one host share a
range; each takes only a uid no other holds, and kills at its start only what runs under a uid none holds. What still
runs as a uid is found in /proc."""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
from pathlib import Path

from jetcron.core.host.uid_pool import UidPool

KILL_ROUNDS = 5
"""/proc scans that kill a uid's processes: a process forking while one scan runs is caught by the next."""


def processes_of(uids: set[int]) -> list[tuple[int, int]]:
    """(pid, uid) of every process whose /proc entry (its effective uid) is one of `uids`."""
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if (uid := entry.stat(follow_symlinks=False).st_uid) in uids:
                    found.append((int(entry.name), uid))
    return found


def kill_processes_of(uids: set[int]) -> list[int]:
    """SIGKILL every process of `uids`, scanning again while any was found (one that forked meanwhile)."""
    killed: list[int] = []
    for _ in range(KILL_ROUNDS):
        found = [pid for pid, _ in processes_of(uids)]
        for pid in found:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        killed += found
        if not found:
            break
    return killed


def lock(lock_dir: Path | None, uid: int) -> int | None:
    """The uid's lock, held by the descriptor returned; None if another agent of this host holds it."""
    assert lock_dir is not None
    fd = os.open(lock_dir / str(uid), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


def take(pool: UidPool, lock_dir: Path | None) -> tuple[int, int] | None:
    """A uid of the pool free here and on this host, claimed, and the descriptor holding its lock; None if none is."""
    for uid in pool.candidates():
        if (fd := lock(lock_dir, uid)) is not None:
            pool.claim(uid)
            return uid, fd
    return None


def give(pool: UidPool | None, uid: int | None, fd: int) -> None:
    """Give a uid taken back to the pool, and its lock up."""
    if pool is not None and uid is not None:
        pool.release(uid)
    with contextlib.suppress(OSError):
        os.close(fd)  # closing it releases the lock


def kill_free(pool: UidPool, lock_dir: Path | None) -> list[int]:
    """Kill the processes an earlier life left under the pool's uids (those no other agent holds now)."""
    killed = []
    for uid in sorted({uid for _, uid in processes_of(set(pool.candidates()))}):
        if (fd := lock(lock_dir, uid)) is not None:
            try:
                killed += kill_processes_of({uid})
            finally:
                os.close(fd)
    return killed

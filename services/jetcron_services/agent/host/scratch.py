"""Each attempt's share of the host: a private scratch directory (its working directory, JETCRON_SCRATCH and
TMPDIR), a private /tmp where the agent may make one, and a uid of its own wherever the agent can switch users
(from JETCRON_AGENT_JOB_UIDS, or a free range of its own where that is unset). Made before the child starts,
removed once it has ended, and what an earlier life left is removed at the agent's start. The decisions are
jetcron.core.host.job_view's and jetcron.core.host.uid_pool's; this module does their I/O (the uids' host-wide locks:
uid_locks.py).

Layout: `<scratch root>/<agent id>/<random name>`, the root and the agent's folder owned by the agent, mode 0711
(a job reaches the one it is told of and lists none), each scratch 0700 and owned by the job's user. The root is
`JETCRON_AGENT_SCRATCH_DIR`, by default `<data dir>/scratch`.
"""

from __future__ import annotations

import asyncio
import contextlib
import grp
import os
import pwd
import secrets
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from jetcron.config import Settings
from jetcron.core.errors import Misconfigured
from jetcron.core.host.job_view import (
    PRIVATE_TMP,
    SCRATCH_MODE,
    SCRATCH_PARENT_MODE,
    ChildView,
    data_dir_mode,
    first_blocked,
    plan,
)
from jetcron.core.host.uid_pool import (
    LOCAL_RANGES,
    UidPool,
    format_uid_range,
    local_range,
    parse_uid_range,
    usable_uids,
)
from jetcron_services.agent.host import launch, uid_locks
from jetcron_services.agent.host.confine import JobUser


class NoRoom(Exception):
    """An attempt's scratch or uid could not be had: it ends start_failed with this reason."""


@dataclass
class Room:
    """One attempt's share: its view, its scratch directory, and the uid lock it holds (None: no uid of its own)."""

    view: ChildView
    path: Path
    uid_lock: int | None = None
    """The file descriptor holding the lock on the attempt's uid: the lock lasts as long as it is open, and ends
    with the agent whatever way it dies."""


def remove_tree(path: Path) -> bool:
    """Remove a scratch and everything in it (never following a link out of it: rmtree works by file
    descriptors); True if it is gone. A job running as the agent's own (unprivileged) user may leave a folder it
    made unwritable: a second pass makes each folder writable again first, skipping links (chmod follows them).
    Root needs no second pass: it may remove anything."""
    shutil.rmtree(path, ignore_errors=True)
    if path.exists() and os.geteuid() != 0:
        for here, dirs, _ in os.walk(path):
            for name in dirs:
                inner = os.path.join(here, name)
                if not os.path.islink(inner):
                    with contextlib.suppress(OSError):
                        os.chmod(inner, 0o700)
        with contextlib.suppress(OSError):
            os.chmod(path, 0o700)
        shutil.rmtree(path, ignore_errors=True)
    return not path.exists()


def _make_private_dir(path: Path, mode: int) -> None:
    """A folder of the agent's with exactly this mode (made if missing; a folder someone else owns is refused)."""
    path.mkdir(parents=True, exist_ok=True)
    if path.is_symlink() or path.stat().st_uid != os.geteuid():
        raise Misconfigured(f"{path}: the agent's scratch folders must be its own (not a link, not another user's)")
    os.chmod(path, mode)


async def _off_loop(make: Callable[[], Path], undo: Callable[[Path], object]) -> Path:
    """`make()` in a thread: a folder's metadata (mkdir, chown) waits on the filesystem's journal, which a server
    fsyncing every write on the same disk keeps busy, and an agent's event loop blocked there answers no hand-off
    in time (measured: docs/decisions-job-view.md). Cancelled meanwhile, the folder made after all is undone."""
    work = asyncio.ensure_future(asyncio.to_thread(make))
    try:
        return await asyncio.shield(work)
    except asyncio.CancelledError:
        work.add_done_callback(lambda done: None if done.cancelled() or done.exception() else undo(done.result()))
        raise


class Scratches:
    """The agent's scratch root, its private /tmp (if any) and its uid pool (if any)."""

    def __init__(self, root: Path, *, agent_id: str, job_user: JobUser, private_tmp: bool, max_file_mb: int,
                 uids: UidPool | None = None, lock_dir: Path | None = None) -> None:
        self.root = root
        self.dir = root / agent_id
        """This agent's folder: one per agent id, so agents sharing a root remove only their own leftovers."""
        self.job_user = job_user
        self.private_tmp = private_tmp
        """Children that switch to another user get a mount namespace of their own with /tmp their scratch."""
        self.max_file_mb = max_file_mb
        self.uids = uids
        self.lock_dir = lock_dir
        """Where the uids' locks are (host/uid_locks.py)."""

    @property
    def switches(self) -> bool:
        """Jobs run as another user than the agent's (a root agent, unless @agent)."""
        return self.job_user.uid is not None

    def view(self, run_as_root: bool) -> ChildView:
        """The view of a job before its uid is given: a job allowed root keeps the agent's own view."""
        switch = None if run_as_root or self.job_user.uid is None or self.job_user.gid is None \
            else (self.job_user.uid, self.job_user.gid)
        return plan(switch=switch, own_uid=self.uids is not None, private_tmp_ok=self.private_tmp,
                    max_file_mb=self.max_file_mb)

    # --- one attempt ---------------------------------------------------------------------------------------

    def make(self) -> Path:
        """A new scratch owned by the agent, mode 0700 (a spare's, before its run and user are known)."""
        path = self.dir / secrets.token_hex(8)
        path.mkdir(mode=SCRATCH_MODE)
        os.chmod(path, SCRATCH_MODE)  # whatever the umask
        return path

    async def make_soon(self) -> Path:
        """make(), in a thread (`_off_loop`)."""
        return await _off_loop(self.make, remove_tree)

    async def open_soon(self, run_as_root: bool, path: Path | None = None) -> Room:
        """An attempt's room: its uid (from the pool, locked), its scratch (`path`, a spare's, or a new one) owned by
        the job's user. Raises NoRoom (nothing kept) when the pool has no free uid or the folder cannot be made.
        The folder is made and handed over in a thread (`_off_loop`); the uid is taken and given back here: the
        pool is the event loop's alone."""
        view, uid_lock = self._take_view(run_as_root)
        try:
            made = await _off_loop(partial(self._furnish, view, path), remove_tree)
        except BaseException:  # NoRoom, or cancelled (the folder, if made after all, is removed then)
            self._give_back(view, uid_lock)
            raise
        return Room(view, made, uid_lock)

    def _take_view(self, run_as_root: bool) -> tuple[ChildView, int | None]:
        """The attempt's view, with a uid of its own (locked: the descriptor returned) where the agent gives one."""
        view = self.view(run_as_root)
        if not view.own_uid:
            return view, None
        assert self.uids is not None
        taken = uid_locks.take(self.uids, self.lock_dir)
        if taken is None:
            raise NoRoom(f"no free uid in JETCRON_AGENT_JOB_UIDS ({len(self.uids)} uids, {len(self.uids.in_use)} "
                         "in use by this agent, the rest by other agents of this host)")
        uid, uid_lock = taken
        return view.with_uid(uid), uid_lock

    def _furnish(self, view: ChildView, path: Path | None) -> Path:
        """The scratch (`path`, or a new one) owned by the view's user (blocking). NoRoom, the folder removed, if it
        cannot be made or handed over."""
        try:
            if path is None:
                path = self.make()
            if view.user is not None:
                os.chown(path, *view.user)
        except OSError as exc:
            if path is not None:
                remove_tree(path)
            raise NoRoom(f"could not make the attempt's scratch directory: {exc.strerror or exc}") from None
        return path

    def _give_back(self, view: ChildView, uid_lock: int | None) -> None:
        if uid_lock is not None:
            uid_locks.give(self.uids, view.user[0] if view.user is not None else None, uid_lock)

    def close(self, room: Room) -> bool:
        """Once the child has ended (blocking): kill what is left of its uid (a uid of its own: nothing else runs
        as it; a process that left its process group or cgroup is caught here), remove its scratch, give its uid
        back. True if the scratch is gone (a busy one goes at the next start)."""
        gone = self._clean(room)
        self._release(room)
        return gone

    async def close_soon(self, room: Room) -> bool:
        """close(), the killing and removing in a thread (a large scratch takes a while), the uid given back here:
        the pool is the event loop's alone."""
        gone = await asyncio.to_thread(self._clean, room)
        self._release(room)
        return gone

    def _clean(self, room: Room) -> bool:
        if room.uid_lock is not None and room.view.user is not None:
            uid_locks.kill_processes_of({room.view.user[0]})
        return remove_tree(room.path)

    def _release(self, room: Room) -> None:
        self._give_back(room.view, room.uid_lock)
        room.uid_lock = None

    # --- the agent's start ---------------------------------------------------------------------------------

    @classmethod
    def setup(cls, settings: Settings, agent_id: str, job_user: JobUser, launcher: str | None = None
              ) -> tuple[Scratches, list[str]]:
        """At the agent's start (blocking): the scratch root and this agent's folder; whether a private /tmp works
        here; the uid pool; the data dir closed to job users. With notes for the log: what jobs will not get here,
        and why. Misconfigured: a uid range that cannot serve every slot, a scratch folder not the agent's."""
        data_dir = Path(settings.data_dir).resolve()
        root = Path(settings.agent_scratch_dir).resolve() if settings.agent_scratch_dir else data_dir / "scratch"
        switches = job_user.uid is not None
        notes: list[str] = []
        uids, lock_dir = None, None
        ids, note = job_uid_range(settings, job_user) if switches else (range(0), None)
        if note is not None:
            notes.append(note)
        if ids:
            uids = UidPool(usable_uids(ids, {p.pw_uid for p in pwd.getpwall()}, {g.gr_gid for g in grp.getgrall()}))
            if len(uids) < settings.agent_slots:
                raise Misconfigured(f"JETCRON_AGENT_JOB_UIDS={format_uid_range(ids)}: {len(uids)} uids no user or "
                                    f"group of this host has, fewer than the agent's {settings.agent_slots} slots")
            # host-wide, not the data dir's: agents of two systems on one host (two `jetcron up`s, a test beside a
            # system) give out the same range, and each kills at its start what runs under a uid no lock holds
            lock_dir = Path(settings.agent_job_uid_locks)
            _make_private_dir(lock_dir, 0o700)
        _make_private_dir(root, SCRATCH_PARENT_MODE)
        scratches = cls(root, agent_id=agent_id, job_user=job_user, private_tmp=False,
                        max_file_mb=settings.agent_max_file_mb, uids=uids, lock_dir=lock_dir)
        _make_private_dir(scratches.dir, SCRATCH_PARENT_MODE)
        if switches and settings.agent_private_tmp:
            why = probe_private_tmp(scratches.dir, launcher)
            scratches.private_tmp = why is None
            if why is not None:
                notes.append(f"no private /tmp for jobs: {why}")
        if switches:
            notes += scratches._close_data_dir(data_dir)
        return scratches, notes

    def clear_leftovers(self) -> tuple[list[str], list[int]]:
        """What an earlier life left (blocking; after its process groups are killed): its scratch directories, and
        the processes still running under the pool's uids that no other agent holds. Their names and pids."""
        removed = []
        for left in self.dir.iterdir():
            remove_tree(left)
            removed.append(left.name)
        return removed, uid_locks.kill_free(self.uids, self.lock_dir) if self.uids is not None else []

    def _close_data_dir(self, data_dir: Path) -> list[str]:
        """Nothing of the data dir readable to job users; searchable only where a job must pass through it to its
        scratch. A data dir the agent does not own is left as it is."""
        notes = []
        traverse = not self.private_tmp and data_dir in self.root.parents
        with contextlib.suppress(OSError):
            st = data_dir.stat()
            if st.st_uid == os.geteuid():
                os.chmod(data_dir, data_dir_mode(st.st_mode & 0o7777, traverse=traverse))
        user = self.view(run_as_root=False).user
        if not self.private_tmp and user is not None:
            uid, gid = (self.uids.candidates()[0],) * 2 if self.uids is not None else user
            chain: list[tuple[str, int, int, int]] = []
            for path in [*reversed(self.dir.parents), self.dir]:
                with contextlib.suppress(OSError):
                    st = path.stat()
                    chain.append((str(path), st.st_mode, st.st_uid, st.st_gid))
            blocked = first_blocked(chain, uid, gid)
            if blocked is not None:
                notes.append(f"jobs start in their scratch but cannot open it by its path (JETCRON_SCRATCH, TMPDIR): "
                             f"uid {uid} may not search {blocked}; set JETCRON_AGENT_SCRATCH_DIR to a folder under "
                             "directories every user may search")
        return notes


def job_uid_range(settings: Settings, job_user: JobUser) -> tuple[range, str | None]:
    """The uids an agent that switches users gives its attempts (empty: none, every job runs as `job_user`), and
    what to say of it at start. Unset, a range of the agent's own: the first of jetcron.core.host.uid_pool.LOCAL_RANGES
    that no user or group of this host reaches into and that holds the agent's slots."""
    if settings.agent_job_uids is not None:
        ids = parse_uid_range(settings.agent_job_uids)
        if ids:
            return ids, None
        return ids, (f"every job runs as {job_user.name} (JETCRON_AGENT_JOB_UIDS is empty): running jobs can read "
                     "each other's scratch and environment (their secrets, their run credential) through /proc")
    found = local_range(settings.agent_slots, {p.pw_uid for p in pwd.getpwall()}, {g.gr_gid for g in grp.getgrall()})
    if found is None:
        ranges = " or ".join(format_uid_range(r) for r in LOCAL_RANGES)
        return range(0), (f"every job runs as {job_user.name}: no range of uids for one of its own per attempt is "
                          f"free on this host ({ranges}: a user or group reaches into each); running jobs can read "
                          "each other's scratch and environment through /proc. Set JETCRON_AGENT_JOB_UIDS="
                          "FIRST-LAST to a range no user or group of the host has")
    return found, None


def probe_private_tmp(scratch_parent: Path, launcher: str | None = None) -> str | None:
    """Whether a child can be given a mount namespace with a folder bound over /tmp, by the very launcher a run's
    child is started through (launch.command: jetcron-launch, or None for its twin): None if it can, else why not
    (not root, no CAP_SYS_ADMIN in a container). The namespace is gone when the probe exits."""
    if os.geteuid() != 0:
        return "the agent is not root"
    test = shutil.which("test")
    if test is None:
        return "no `test` program to probe with"
    probe = scratch_parent / f"probe-{secrets.token_hex(4)}"
    probe.mkdir(mode=SCRATCH_MODE)
    try:
        marker = f"seen-{secrets.token_hex(4)}"
        (probe / marker).touch()
        view = ChildView(user=None, private_tmp=True, own_uid=False, max_file_bytes=None)
        spawn = launch.command([test, "-e", f"{PRIVATE_TMP}/{marker}"], {}, None, None, view, str(probe), launcher)
        done = subprocess.run(spawn.argv, cwd=probe, input=spawn.stdin or b"", capture_output=True, timeout=10,
                              check=False, env=spawn.env)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"the probe did not run ({exc})"
    finally:
        remove_tree(probe)
    if done.returncode != 0:
        return f"a mount namespace with a private /tmp was refused: {done.stderr.decode(errors='replace').strip()}"
    return None

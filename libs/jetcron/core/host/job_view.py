"""What a job's process sees of its host, decided without touching it (docs/security.md, "A job's view of the
host"): the user it runs as, its scratch directory (where it is, the path the job is told, its owner and mode),
whether its /tmp is private, the largest file it may write, and the modes of the directories around the scratch.
The agent does the I/O (services/jetcron_services/agent/host/scratch.py); these are the rules it follows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

SCRATCH_MODE = 0o700
"""An attempt's scratch: its owner's alone."""
SCRATCH_PARENT_MODE = 0o711
"""The scratch root and the agent's folder in it, owned by the agent: a job reaches the scratch it is told of by
path (where its /tmp is not private) but can list none, so it learns no other attempt's."""
PRIVATE_TMP = "/tmp"
"""Where a job with a private mount namespace sees its scratch: its /tmp is its scratch."""


@dataclass(frozen=True)
class ChildView:
    """One attempt's view of the host, before its scratch exists."""

    user: tuple[int, int] | None
    """(uid, gid) the child switches to; None: it stays the agent's user (and owns the scratch as the agent)."""
    private_tmp: bool
    """The child runs in a mount namespace of its own where /tmp is its scratch (bound over the host's)."""
    own_uid: bool
    """The attempt gets a uid of its own from the agent's range (its gid the same number): `user` is the job
    user's until the uid is given (with_uid). Such a uid has no passwd entry, so HOME is the scratch."""
    max_file_bytes: int | None
    """RLIMIT_FSIZE of the child (None: unlimited)."""

    def with_uid(self, uid: int) -> ChildView:
        """The view once the attempt's own uid is given."""
        return replace(self, user=(uid, uid))

    def shown(self, scratch: str) -> str:
        """The scratch's path as the job is told it (JETCRON_SCRATCH, TMPDIR, its working directory)."""
        return PRIVATE_TMP if self.private_tmp else scratch

    def env(self, scratch: str, job_env: Mapping[str, str]) -> dict[str, str]:
        """The variables that point the job at its scratch: JETCRON_SCRATCH always (the job's own env may not
        name a JETCRON_ variable), TMPDIR and (with a uid of its own, which has no home) HOME unless the job's env
        sets them."""
        path = self.shown(scratch)
        wanted = {"TMPDIR": path, **({"HOME": path} if self.own_uid else {})}
        return {**{k: v for k, v in wanted.items() if k not in job_env}, "JETCRON_SCRATCH": path}


def plan(*, switch: tuple[int, int] | None, own_uid: bool, private_tmp_ok: bool, max_file_mb: int) -> ChildView:
    """The view of an attempt: `switch` the job user's (uid, gid), or None where the child stays the agent's user
    (an unprivileged agent, `@agent`, a job allowed to run as root); `own_uid` where the agent gives each attempt
    a uid of its own (a child that stays the agent's user gets none). A private /tmp only for a child that
    switches to another user: one running as the agent's user can read whatever the agent can anyway, and keeps
    the agent's view."""
    return ChildView(user=switch, private_tmp=private_tmp_ok and switch is not None,
                     own_uid=own_uid and switch is not None,
                     max_file_bytes=max_file_mb * 1024 * 1024 if max_file_mb > 0 else None)


def data_dir_mode(current: int, *, traverse: bool) -> int:
    """The agent's data dir when jobs run as another user: nothing readable or writable by group or others (the
    pgid journal, the uid locks, and beside them `jetcron up`'s logs, NATS store and keys); searchable by others
    only where a job must pass through it to reach its scratch by path (no private /tmp)."""
    return (current & 0o700) | (0o011 if traverse else 0)


def first_blocked(chain: Sequence[tuple[str, int, int, int]], uid: int, gid: int) -> str | None:
    """The first directory of `chain` (path, mode, owner uid, owner gid; from / down to the scratch root) that
    uid:gid may not search (no x bit for its class), or None: a job can open its scratch by path."""
    for path, mode, owner, group in chain:
        bit = 0o100 if owner == uid else 0o010 if group == gid else 0o001
        if uid != 0 and not mode & bit:
            return path
    return None

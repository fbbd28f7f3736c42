"""A uid of its own for each attempt (JETCRON_AGENT_JOB_UIDS), as build farms give each build a user.

Jobs that share a user share everything that user owns: a running job's working directory and /tmp are open to
any other process of its user (`/proc/PID/cwd`, `/proc/PID/root`), and so are its signals, its memory (ptrace)
and its environment, secrets included. A mode of 0700 separates users, not jobs; so each attempt runs as a uid
no other running attempt has. The agent locks each uid it gives out (jetcron_services.agent.host.uid_locks) so
that agents of one host never give out the same one; this module is the choice, and that of the range `jetcron up` gives
its local agents when none is set (local_range).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable

MAX_UID = 2**32 - 2
"""The largest uid Linux takes ((uid_t)-1 means "unchanged")."""

LOCAL_RANGES = (range(60578, 61184), range(65536, 100000))
"""The ranges `jetcron up` may give its local agents when it runs as root and no range is set, in this order:
60578-61183, which systemd's allocation table leaves unused, then 65536-99999, which it leaves unused too and which
lies below 100000, where useradd starts the subordinate uids of rootless containers (/etc/subuid)."""


def parse_uid_range(text: str) -> range:
    """`FIRST-LAST` (inclusive) as a range; empty text: an empty range (the setting is off)."""
    text = text.strip()
    if not text:
        return range(0)
    first, sep, last = text.partition("-")
    try:
        lo, hi = int(first), int(last)
    except ValueError:
        lo = hi = -1
    if not sep or not 0 < lo <= hi <= MAX_UID:
        raise ValueError(f"JETCRON_AGENT_JOB_UIDS={text!r}: FIRST-LAST, two uids with 0 < FIRST <= LAST, e.g. "
                         "60578-61183")
    return range(lo, hi + 1)


def usable_uids(uids: range, named_users: Collection[int], named_groups: Collection[int]) -> list[int]:
    """The uids of the range that no user or group of this host has: a run's uid (and its gid, the same number)
    must hold nothing, or the job would hold what that user or group may do."""
    return [u for u in uids if u not in named_users and u not in named_groups]


def format_uid_range(uids: range) -> str:
    """The range as JETCRON_AGENT_JOB_UIDS spells it (parse_uid_range's inverse)."""
    return f"{uids.start}-{uids.stop - 1}"


def local_range(needed: int, named_users: Collection[int], named_groups: Collection[int],
                candidates: Iterable[range] = LOCAL_RANGES) -> range | None:
    """The first candidate that no user or group of this host reaches into, with room for `needed` attempts at once;
    None if there is none. A whole range free of names, not one with its named uids skipped: a host that gave out a
    uid in it may give out more (a range is somebody's), and jobs would then hold what its users may do."""
    for uids in candidates:
        if len(uids) >= needed and not any(u in uids for u in (*named_users, *named_groups)):
            return uids
    return None


class UidPool:
    """The uids free to give out, least recently returned first: a uid comes back to a run as late as it can (a
    file an earlier run left under it outside its scratch, in /var/tmp or /dev/shm, is its next holder's)."""

    def __init__(self, uids: Iterable[int]) -> None:
        self._free: dict[int, None] = dict.fromkeys(uids)
        """In order of return (a dict keeps insertion order: O(1) claim from anywhere, release to the end)."""
        self.in_use: set[int] = set()

    def __len__(self) -> int:
        return len(self._free) + len(self.in_use)

    def candidates(self) -> list[int]:
        """Free uids, the one returned longest ago first (another agent may hold one: the caller tries its lock)."""
        return list(self._free)

    def claim(self, uid: int) -> None:
        del self._free[uid]
        self.in_use.add(uid)

    def release(self, uid: int) -> None:
        if uid in self.in_use:
            self.in_use.discard(uid)
            self._free[uid] = None

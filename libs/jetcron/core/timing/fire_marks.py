"""A shard's fire mark: which `now` jobs have fired, as one number per shard instead of a write per job.

A `now` job is made with its end already set (JobRecord.fired_by_mark, jetcron.core.lifecycle.retention.fires_by_mark),
so the trigger writes nothing to it once its run is recorded. Whether it has fired is then its shard's mark: the jobs
bucket's revision up to which every such job of the shard has had its occurrence recorded (or met its gate). The
shard's holder moves the mark on (one revision-checked write per shard now and then, however many jobs fired);
every replica reads it, so a standby forgets the jobs it covers and a new holder plans only those past it.

Safety rests on one rule: the mark never passes a revision that still has an occurrence to record. A job is open
from the revision its watch delivered until its fire at that revision is recorded; the mark stays below the
oldest open revision of the shard, and never passes what the watch has delivered (revisions come in order, so
every job at or below that position has been seen).
"""

from __future__ import annotations

MARK_PREFIX = "_fired."
"""Cursor keys of the marks, one per shard: a job name never starts with `_` (jetcron.core.ids.JOB_NAME_RE)."""


def mark_key(shard: int) -> str:
    return f"{MARK_PREFIX}{shard}"


def mark_shard(key: str) -> int | None:
    """The shard a cursor key marks, or None for a job's own cursor."""
    if not key.startswith(MARK_PREFIX):
        return None
    tail = key[len(MARK_PREFIX):]
    return int(tail) if tail.isdigit() else None


def covers(mark: int, revision: int) -> bool:
    """Whether a shard's mark says a job made with its end, at `revision`, has fired (a mark `mark` read as a
    revision: also whether one mark already holds another)."""
    return revision <= mark


class FireMarks:
    """The marks one trigger replica knows, and the jobs it holds that no mark covers yet."""

    def __init__(self) -> None:
        self.through: dict[int, int] = {}
        """Each shard's mark as last read or written (0: none yet, nothing is known fired)."""
        self.open: dict[int, dict[str, int]] = {}
        """Per shard, each job (by name) not yet known fired, at the revision that is to fire."""
        self.position = 0
        """The highest revision the jobs watch has delivered."""
        self.moved: set[int] = set()
        """Shards where a job closed since their mark was last noted: only their marks are worth a write (a
        shard that fires no `now` job is never written, however far the watch moves)."""

    def fired(self, shard: int, revision: int) -> bool:
        """Whether a job made with its end, at `revision`, has had its occurrence recorded."""
        return covers(self.through.get(shard, 0), revision)

    def delivered(self, revision: int) -> None:
        self.position = max(self.position, revision)

    def opened(self, shard: int, name: str, revision: int) -> None:
        """`name` is to fire at `revision` (a newer revision of the job replaces an older one)."""
        self.open.setdefault(shard, {})[name] = revision

    def closed(self, shard: int, name: str, revision: int | None = None) -> None:
        """`name` has nothing more to record: fired at `revision` (None: whatever revision is open; the job
        is gone, paused, or no longer one that the mark judges)."""
        held = self.open.get(shard)
        if held is None or name not in held or (revision is not None and held[name] != revision):
            return
        del held[name]
        if not held:
            del self.open[shard]
        self.moved.add(shard)

    def advance(self, shard: int) -> int | None:
        """The mark the shard's holder may write now, or None if nothing closed there since the last one or it
        would not move on."""
        if shard not in self.moved:
            return None
        held = self.open.get(shard)
        mark = min(held.values()) - 1 if held else self.position
        return mark if mark > self.through.get(shard, 0) else None

    def noted(self, shard: int, mark: int) -> list[str]:
        """A mark read or written (by any replica): the open jobs it covers, to forget (they have fired)."""
        if covers(self.through.get(shard, 0), mark):
            return []
        self.through[shard] = mark
        self.moved.discard(shard)
        held = self.open.get(shard, {})
        covered = [name for name, revision in held.items() if covers(mark, revision)]
        for name in covered:
            del held[name]
        if not held:
            self.open.pop(shard, None)
        return covered

"""The long-life bench's ledger: which occurrences of its recurring jobs must have a finished run record, and
how many finished writes each one got.

Millions of occurrences cannot be Python strings (tens of bytes of object each): each job's occurrences are
numbered from its anchor (every job fires every `period_ms` from its own anchor, a whole millisecond), and a
bytearray per job holds one counter per occurrence, so 3,000,000 runs cost 3 MB. A run id says which
occurrence it is (`<job key>.<YYYYMMDDTHHMMSSmmmZ>`, jetcron.core.ids); the counter counts terminal writes, capped
at 255.
"""

from __future__ import annotations

import calendar
import time
from dataclasses import dataclass, field

GROW = 4096
"""Counters added at a time when a job's bytearray is too short: one allocation per hour of 1 s fires."""

_TERMINAL = frozenset({"succeeded", "failed", "dead", "cancelled", "skipped", "blocked"})


def is_terminal(state: str) -> bool:
    return state in _TERMINAL


_DAYS: dict[str, int] = {}


def stamp_ms(stamp: str) -> int | None:
    """Epoch milliseconds of a run id's instant (`20261204T181112345Z`); None for any other form (a suffixed id:
    a manual run or a replay, which no recurring occurrence has)."""
    if len(stamp) != 19 or stamp[8] != "T" or stamp[18] != "Z":
        return None
    day = stamp[:8]
    base = _DAYS.get(day)
    if base is None:
        base = calendar.timegm((int(day[:4]), int(day[4:6]), int(day[6:8]), 0, 0, 0)) * 1000
        _DAYS[day] = base
    return base + int(stamp[9:11]) * 3_600_000 + int(stamp[11:13]) * 60_000 + int(stamp[13:15]) * 1000 + int(
        stamp[15:18])


@dataclass
class Verdict:
    """What the ledger found among the occurrences it judged (those due before a settle line)."""

    occurrences: int = 0
    """Occurrences that must have a finished record: from each job's first fire to its last."""
    finished: int = 0
    """Of those, with at least one terminal write."""
    lost: int = 0
    """With none: never recorded, or recorded and never finished."""
    recorded_twice: int = 0
    """With more than one terminal write (a record that aged out and was made again shows up here)."""
    revived: int = 0
    """Occurrences written again, not finished, after a terminal write: a record made a second time."""
    lost_examples: list[str] = field(default_factory=list)
    twice_examples: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, object]:
        return {"occurrences": self.occurrences, "finished": self.finished, "lost": self.lost,
                "recorded_twice": self.recorded_twice, "revived": self.revived,
                "lost_examples": self.lost_examples, "twice_examples": self.twice_examples}


class Ledger:
    """Counts the runs bucket's writes per occurrence of the bench's jobs (one anchor per job)."""

    def __init__(self, anchors_ms: dict[str, int], period_ms: int = 1000) -> None:
        self.anchors = dict(anchors_ms)
        self.period = period_ms
        self.counts: dict[str, bytearray] = {job: bytearray(GROW) for job in anchors_ms}
        self.seen: dict[str, int] = dict.fromkeys(anchors_ms, -1)
        """The highest occurrence index written at all, per job (-1: none yet)."""
        self.revived: set[tuple[str, int]] = set()
        self.terminal_writes = 0
        self.writes = 0
        self.removals = 0
        """Delete or purge markers (a record aged out or was removed)."""
        self.foreign = 0
        """Writes to records of no job of the ledger."""
        self.off_grid = 0
        """Writes whose instant is not one of its job's occurrences (a suffixed id, or off the period)."""
        self.states: dict[str, int] = {}
        """Terminal writes by state."""

    def _index(self, key: str) -> tuple[str, int] | None:
        job, _, stamp = key.rpartition(".")
        anchor = self.anchors.get(job)
        if anchor is None:
            self.foreign += 1
            return None
        at = stamp_ms(stamp)
        if at is None or at < anchor or (at - anchor) % self.period:
            self.off_grid += 1
            return None
        return job, (at - anchor) // self.period

    def removed(self, key: str) -> None:
        """A delete or purge marker on a record (its last revision aged out, or someone removed it)."""
        self.removals += 1

    def write(self, key: str, state: str) -> None:
        """One write of run record `key` (its run id) in `state`."""
        self.writes += 1
        found = self._index(key)
        if found is None:
            return
        job, k = found
        counts = self.counts[job]
        if k >= len(counts):
            counts.extend(bytes(max(GROW, k + 1 - len(counts))))
        if k > self.seen[job]:
            self.seen[job] = k
        if is_terminal(state):
            self.terminal_writes += 1
            self.states[state] = self.states.get(state, 0) + 1
            if counts[k] < 255:
                counts[k] += 1
        elif counts[k]:
            self.revived.add((job, k))

    def due(self, until_ms: int) -> int:
        """Occurrences due at or before `until_ms`, over every job."""
        return sum(self._last_due(job, until_ms) + 1 for job in self.anchors)

    def _last_due(self, job: str, until_ms: int) -> int:
        """The index of the job's last occurrence due at or before `until_ms` (-1: none)."""
        anchor = self.anchors[job]
        return -1 if until_ms < anchor else (until_ms - anchor) // self.period

    def judge(self, settled_ms: int, stopped_ms: dict[str, int] | None = None, *, written: bool = True,
              examples: int = 5) -> Verdict:
        """Every occurrence from each job's first fire to its last: the last due before `settled_ms` (and before
        its job was stopped, if it was: after that, none is owed), or with `written` the last one written if that
        is later (at the end every recorded occurrence must have finished; while runs go on, those recorded
        ahead or still running are not late)."""
        verdict = Verdict()
        for job, counts in self.counts.items():
            line = settled_ms if stopped_ms is None or job not in stopped_ms else min(settled_ms, stopped_ms[job])
            last = self._last_due(job, line)
            if written:
                last = max(last, self.seen[job])
            if last < 0:
                continue
            n = last + 1
            if n > len(counts):
                counts.extend(bytes(n - len(counts)))
            zero, one = counts.count(0, 0, n), counts.count(1, 0, n)
            verdict.occurrences += n
            verdict.finished += n - zero
            verdict.lost += zero
            verdict.recorded_twice += n - zero - one
            if zero and len(verdict.lost_examples) < examples:
                verdict.lost_examples.append(self.name(job, counts.index(0, 0, n)))
            if n - zero - one and len(verdict.twice_examples) < examples:
                k = next(i for i in range(n) if counts[i] > 1)
                verdict.twice_examples.append(self.name(job, k))
        verdict.revived = len(self.revived)
        return verdict

    def name(self, job: str, k: int) -> str:
        """The run id of occurrence `k` of `job` (for a report)."""
        at = self.anchors[job] + k * self.period
        seconds, ms = divmod(at, 1000)
        return f"{job}.{time.strftime('%Y%m%dT%H%M%S', time.gmtime(seconds))}{ms:03d}Z"

"""Herd-aware staging: a crowded due second is staged earlier, so its runs are ready when it comes.

The trigger records an occurrence `horizon` seconds before it is due. That covers a second holding up to
`horizon x rate` occurrences, where `rate` is how many runs per second the cluster can record, place and
lease ahead. A fuller second (the midnight herd: 100,000 jobs at 00:00) needs `count / rate` seconds of
staging: each job beyond what the horizon covers is staged `1 / rate` seconds earlier than the one before,
up to `max_lead`. The counts are of every job waiting for that second in the warm index (all shards), so
the spread is the same on every replica and survives a takeover.
"""

from __future__ import annotations

from datetime import datetime

__all__ = ["Herds", "extra_lead"]


def extra_lead(position: int, *, horizon: float, rate: float, max_lead: float) -> float:
    """Seconds before `horizon` that the `position`-th job (from 1) of one due second is staged."""
    if position < 1:
        raise ValueError(f"position counts from 1 (got {position})")
    return min(max_lead, max(0.0, (position - 1) / rate - horizon))


class Herds:
    """How many jobs wait for each due second, and the extra lead each one was given."""

    def __init__(self, *, horizon: float, rate: float, max_lead: float) -> None:
        if rate <= 0:
            raise ValueError(f"rate must be positive (got {rate})")
        self.horizon, self.rate, self.max_lead = horizon, rate, max_lead
        self._count: dict[int, int] = {}
        self._of: dict[str, tuple[int, float]] = {}
        """job -> (due second, extra lead); only jobs given an extra lead are kept (memory per schedule)."""
        self._plain: dict[str, int] = {}
        """job -> due second, for the jobs the horizon covers."""

    def __len__(self) -> int:
        return len(self._of) + len(self._plain)

    def enter(self, job: str, due: datetime) -> float:
        """`job` next comes due at `due`: count it in that second; the extra lead it gets (seconds)."""
        self.leave(job)
        second = int(due.timestamp())
        position = self._count[second] = self._count.get(second, 0) + 1
        extra = extra_lead(position, horizon=self.horizon, rate=self.rate, max_lead=self.max_lead)
        if extra > 0:
            self._of[job] = (second, extra)
        else:
            self._plain[job] = second
        return extra

    def leave(self, job: str) -> float:
        """`job` is being staged (or is gone): it no longer counts; the extra lead it had."""
        if job in self._of:
            second, extra = self._of.pop(job)
        elif job in self._plain:
            second, extra = self._plain.pop(job), 0.0
        else:
            return 0.0
        left = self._count[second] - 1
        if left:
            self._count[second] = left
        else:
            del self._count[second]
        return extra

    def waiting(self, due: datetime) -> int:
        """Jobs counted for the second of `due`."""
        return self._count.get(int(due.timestamp()), 0)

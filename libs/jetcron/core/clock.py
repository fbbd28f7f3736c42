"""The clock is injected: core code takes `now`; services get it from a Clock."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Protocol


class Clock(Protocol):
    def now(self) -> datetime: ...


class ManualClock:
    """A clock tests move by hand."""

    def __init__(self, start: datetime | None = None) -> None:
        self._now = start or datetime(2026, 1, 1, tzinfo=UTC)

    def now(self) -> datetime:
        return self._now

    def advance(self, seconds: float) -> datetime:
        self._now += timedelta(seconds=seconds)
        return self._now

    def set(self, at: datetime) -> None:
        self._now = at


COARSE_MARGIN = 0.05
"""A sleep wakes a few ms late (timer slack: 5 ms on a 5 s sleep; docs/decisions-trigger.md, "Waking on time"):
sleep to this many seconds before an instant, then the rest, to wake within ~1.5 ms of it."""


def next_wait(left: float) -> float:
    """How long to sleep now with `left` seconds to go: all but the margin, then the margin itself."""
    return left - COARSE_MARGIN if left > COARSE_MARGIN else max(0.0, left)

"""The twin of ports.LeaseLog: the lease buckets' subjects in a dict, with no clock of their own."""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import UTC, datetime

from jetcron.bus.memory._match import subject_matches
from jetcron.bus.ports import LeaseEntry
from jetcron.core.errors import WriteConflict
from jetcron.wire import subjects as s


class MemoryLeaseLog:
    """ports.LeaseLog in a dict of subjects, as the lease buckets store them: one subject per key, per writer for
    a run lease's claims, each write checked against the last of the key's subjects (subjects.lease_filter).

    It does not stand in for the server's TTL clock: nothing here expires by itself. A write's TTL is kept
    (`ttl_of`), and a test lets a lease lapse by saying so (`expire`), as the server would once that TTL had
    passed on its own clock. Liveness judged by time is for the tests against a real server."""

    def __init__(self, clock: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        self.clock = clock
        """Stamps each write, as the server stamps it with its own clock (a test's clock where its runs are due at
        instants of its own)."""
        self._groups: dict[str, dict[str, LeaseEntry]] = {}
        """By key (subjects.lease_filter: every writer's claim on a run is the run's): each subject's last write."""
        self._seq = 0
        self.writes = 0
        """Writes stored so far (a test counts a protocol's writes)."""

    async def write(self, key: str, writer: str, data: bytes, ttl: float, expected: int | None) -> int:
        last = await self.last(key)
        if expected is not None and expected != (last.revision if last is not None else 0):
            raise WriteConflict(f"lease {key}: written by someone else first")
        self._seq += 1
        self.writes += 1
        subject = s.lease_subject(key, writer)
        self._groups.setdefault(s.lease_filter(key), {})[subject] = LeaseEntry(
            data=data, revision=self._seq, written_at=self.clock(), ttl=float(max(1, math.ceil(ttl))),
            writer=s.lease_writer(subject))
        return self._seq

    async def last(self, key: str) -> LeaseEntry | None:
        return max(self._groups.get(s.lease_filter(key), {}).values(), key=lambda entry: entry.revision,
                   default=None)

    async def own(self, key: str, writer: str) -> LeaseEntry | None:
        return self._groups.get(s.lease_filter(key), {}).get(s.lease_subject(key, writer))

    async def keys(self, pattern: str) -> list[str]:
        prefix = s.kv_subject(s.lease_bucket(pattern), "")
        return [subject[len(prefix):] for group in self._groups.values() for subject in group
                if subject.startswith(prefix) and subject_matches(pattern, subject[len(prefix):])]

    def ttl_of(self, key: str) -> float | None:
        """The TTL the key's last write carried."""
        last = max(self._groups.get(s.lease_filter(key), {}).values(), key=lambda e: e.revision, default=None)
        return None if last is None else last.ttl

    def expire(self, key: str, writer: str | None = None) -> None:
        """The key's writes lapse (only `writer`'s claim, when given), as the server drops them once their TTL
        has passed."""
        if writer is None:
            self._groups.pop(s.lease_filter(key), None)
        else:
            self._groups.get(s.lease_filter(key), {}).pop(s.lease_subject(key, writer), None)

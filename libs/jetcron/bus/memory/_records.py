"""The twins of ports.Records and ports.Buckets: a bucket's records in a dict."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import msgspec

from jetcron.bus.memory._match import subject_matches
from jetcron.bus.records import RecordOps, kind_of
from jetcron.core.errors import NotFound, WriteConflict
from jetcron.wire.codec import decode, encode

T = TypeVar("T", bound=msgspec.Struct)

BeforeWrite = Callable[[str, str], Awaitable[None]]
"""Called with (operation, key) before a write lands: a test interleaves another writer there."""


class MemoryRecords(RecordOps[T]):
    """ports.Records in a dict: one revision counter per bucket (as the stream's sequence), delete markers."""

    def __init__(self, name: str, kind: type[T], *, before_write: BeforeWrite | None = None,
                 ttl_of: Callable[[T], int | None] | None = None) -> None:
        self.name = name
        self.kind = kind
        self.before_write = before_write
        self.ttl_of = ttl_of
        self.ttls: dict[str, int | None] = {}
        """The TTL each key's last write asked for (as kv.Store sends it). Nothing here expires: the server's
        clock is what judges a TTL, and only tests against a real server may rely on one passing."""
        self._last: dict[str, tuple[bytes | None, int]] = {}
        self._seq = 0
        self._watchers: list[tuple[str, asyncio.Queue[tuple[str, T | None, int]]]] = []

    async def get(self, key: str) -> tuple[T, int]:
        data, revision = self._last.get(key, (None, 0))
        if data is None:
            raise NotFound(kind_of(self.name), key)
        return decode(data, self.kind), revision

    async def _write(self, op: str, key: str, value: T | None, expect: int | None) -> int:
        if self.before_write is not None:
            await self.before_write(op, key)
        data, revision = self._last.get(key, (None, 0))
        if op == "create" and data is not None:
            raise WriteConflict(f"create {self.name}/{key}: written by someone else first")
        if expect is not None and revision != expect:
            raise WriteConflict(f"{op} {self.name}/{key}: written by someone else first")
        self._seq += 1
        self._last[key] = (None if value is None else encode(value), self._seq)
        self.ttls[key] = None if value is None or self.ttl_of is None else self.ttl_of(value)
        stored = None if value is None else decode(encode(value), self.kind)
        for pattern, queue in self._watchers:
            if subject_matches(pattern, key):
                queue.put_nowait((key, stored, self._seq))
        return self._seq

    async def create(self, key: str, value: T) -> int:
        return await self._write("create", key, value, None)

    async def update(self, key: str, value: T, revision: int) -> int:
        return await self._write("update", key, value, revision)

    async def put(self, key: str, value: T) -> int:
        return await self._write("write", key, value, None)

    async def delete(self, key: str) -> None:
        await self._write("delete", key, None, None)

    async def keys(self, pattern: str = ">") -> list[str]:
        """As the server's per-subject counts: a key whose last write is a delete marker is listed too."""
        return [key for key in self._last if subject_matches(pattern, key)]

    async def mark(self) -> tuple[int, int]:
        """As the server's stream state: one message per key (its last write, or the delete marker)."""
        return self._seq, len(self._last)

    async def watch(self, pattern: str = ">") -> AsyncIterator[tuple[str, T | None, int]]:
        queue: asyncio.Queue[tuple[str, T | None, int]] = asyncio.Queue()
        # The snapshot and the live queue are taken together (no await between): no write falls in a gap.
        current = [(key, decode(data, self.kind), revision) for key, (data, revision) in self._last.items()
                   if data is not None and subject_matches(pattern, key)]
        entry = (pattern, queue)
        self._watchers.append(entry)
        try:
            for item in sorted(current, key=lambda c: c[2]):
                yield item
            yield "", None, 0
            while True:
                yield await queue.get()
        finally:
            self._watchers.remove(entry)

    async def last(self, pattern: str) -> tuple[T, int] | None:
        """As the server's message get by last subject: the key under `pattern` written last (the highest
        revision), None if none is or its last write was a delete."""
        written = [(revision, data) for key, (data, revision) in self._last.items() if subject_matches(pattern, key)]
        if not written:
            return None
        revision, data = max(written, key=lambda w: w[0])
        return None if data is None else (decode(data, self.kind), revision)


class MemoryBuckets:
    """ports.Buckets in memory: one MemoryRecords per bucket and type, the same one each time it is opened."""

    def __init__(self) -> None:
        self.opened: dict[tuple[str, type[Any]], Any] = {}

    async def open(self, name: str, kind: type[T]) -> MemoryRecords[T]:
        made: MemoryRecords[T] = self.opened.setdefault((name, kind), MemoryRecords(name, kind))
        return made

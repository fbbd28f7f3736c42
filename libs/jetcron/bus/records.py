"""What every bucket of records does on top of get and a revision-checked update: the one home of
read-decide-CAS (`change`) and of paged reads, shared by the NATS store (kv.Store) and its twin (jetcron.bus.memory)."""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

import msgspec

from jetcron.core.errors import Contended, JetcronError, NotFound, WriteConflict

T = TypeVar("T", bound=msgspec.Struct)


def kind_of(bucket: str) -> str:
    """What a record of a bucket is called in errors: jc_jobs -> job."""
    return bucket.removeprefix("jc_").rstrip("s")


class RecordOps(ABC, Generic[T]):
    name: str
    kind: type[T]

    @abstractmethod
    async def get(self, key: str) -> tuple[T, int]:
        """The value and its revision, or NotFound."""

    @abstractmethod
    async def update(self, key: str, value: T, revision: int) -> int:
        """Compare-and-set against `revision`; WriteConflict if someone wrote first."""

    async def maybe(self, key: str) -> tuple[T, int] | None:
        try:
            return await self.get(key)
        except NotFound:
            return None

    async def page(self, keys: Sequence[str], limit: int, keep: Callable[[T], bool]) -> tuple[list[T], str | None]:
        """Up to `limit` values that `keep` accepts, reading `keys` in order, concurrently (one round trip per
        batch, not one per record); and the cursor to go on from (the last key read), or None when every key was
        read. A key deleted meanwhile is passed over.

        Each batch is as many keys as values are still missing, so nothing past the value that fills the page is
        read: with everything kept that is one batch, and a filter costs more round trips (about log2(limit)
        when half the values pass it) rather than reads whose values are thrown away."""
        items: list[T] = []
        start = 0
        while start < len(keys) and len(items) < limit:
            batch = keys[start:start + limit - len(items)]
            start += len(batch)
            for found in await asyncio.gather(*(self.maybe(k) for k in batch)):
                if found is not None and keep(found[0]):
                    items.append(found[0])
        return items, (keys[start - 1] if len(items) == limit and start < len(keys) else None)

    async def change(self, key: str, decide: Callable[[T], T | None], *, copy: tuple[T, int] | None = None,
                     tries: int = 8) -> tuple[T, T, int] | None:
        """Read, decide, compare-and-set until a write lands: (old, new, revision written), or None when
        `decide` gives up on the stored value. Its errors on the stored value propagate.

        `copy` (a value and revision a watch delivered) is tried first and saves the read. A copy may be
        stale, so only a CAS that lands on it counts: a refused CAS, a None or an error from `decide` on the
        copy is decided again on the stored value. `decide` must therefore keep no state between calls.
        """
        for _ in range(tries):
            stored = copy is None
            old, revision = copy if copy is not None else await self.get(key)
            copy = None
            try:
                new = decide(old)
            except JetcronError:
                if stored:
                    raise
                continue
            if new is None:
                if stored:
                    return None
                continue
            try:
                return old, new, await self.update(key, new, revision)
            except WriteConflict:
                continue
        raise Contended(f"{self.name}/{key}: too many concurrent writers")

"""A bucket's keys under a pattern, sorted, listed again only when the bucket has changed.

Listing a tenant's keys is the server naming every one (a stream info with a subject filter): at 100,000 jobs of
one tenant that is about 5 MB of JSON on every page of `jobs list` and of the dashboard, most of a page's time
(docs/benchmarks-history.md). Pages are read far more often than jobs change, so the sorted list is kept with the
bucket's mark (Records.mark: its last revision and message count) from before it was listed, and used again while
the mark is the same. A page asked for after any write the server acknowledged sees a later mark and lists afresh, so a
job just created or deleted, through this replica or another, is on the next page as it was without the cache.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from jetcron.bus.ports import Records

KEPT = 8
"""Patterns kept (the tenants paged most recently): at 100,000 keys one costs about 10 MB."""


class KeyListing:
    """`order`: what the keys are sorted by (themselves when None)."""

    def __init__(self, records: Records[Any], kept: int = KEPT, order: Callable[[str], str] | None = None) -> None:
        self.records = records
        self.kept = kept
        self.order = order
        self._lists: OrderedDict[str, tuple[tuple[int, int], list[str]]] = OrderedDict()

    async def after(self, pattern: str, cursor: str) -> list[str]:
        """The keys matching `pattern` past `cursor` (all: ""), in order."""
        keys = await self.ordered(pattern)
        return keys[bisect_right(keys, self.order(cursor) if self.order else cursor, key=self.order):] \
            if cursor else keys

    async def ordered(self, pattern: str) -> list[str]:
        """Every key matching `pattern`, in order (the list kept: not to be changed)."""
        mark = await self.records.mark()
        kept = self._lists.get(pattern)
        if kept is not None and kept[0] == mark:
            self._lists.move_to_end(pattern)
            return kept[1]
        # The mark is taken before the listing: a write landing during it moves the mark, and the next page lists
        # again, whether or not this listing saw that write.
        keys = sorted(await self.records.keys(pattern), key=self.order)
        self._lists[pattern] = (mark, keys)
        self._lists.move_to_end(pattern)
        while len(self._lists) > self.kept:
            self._lists.popitem(last=False)
        return keys

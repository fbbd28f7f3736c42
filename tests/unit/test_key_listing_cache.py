"""The API's key listing lists a bucket's keys again only when the bucket has changed
(services/jetcron_services/api/key_listing.py)."""

from __future__ import annotations

from jetcron.bus.memory import MemoryRecords
from jetcron_services.api.key_listing import KeyListing


class Counted(MemoryRecords[str]):
    def __init__(self) -> None:
        super().__init__("jc_test", str)
        self.listed = 0

    async def keys(self, pattern: str = ">") -> list[str]:
        self.listed += 1
        return await super().keys(pattern)


async def test_a_listing_is_used_again_until_the_bucket_changes() -> None:
    records = Counted()
    for name in ("c", "a", "b"):
        await records.put(f"t1.{name}", name)
    await records.put("t2.z", "z")
    listing = KeyListing(records)
    # The keys of a pattern in order, past a cursor, from one listing
    assert await listing.after("t1.*", "") == ["t1.a", "t1.b", "t1.c"]
    assert await listing.after("t1.*", "t1.a") == ["t1.b", "t1.c"]
    assert await listing.after("t1.*", "t1.c") == []
    assert records.listed == 1
    # A write (any key, any pattern) lists again, and the new key is there
    await records.put("t1.aa", "aa")
    assert await listing.after("t1.*", "t1.a") == ["t1.aa", "t1.b", "t1.c"]
    assert records.listed == 2
    # ... as does a delete (the key is listed until its marker goes, as on the server: a page passes over it)
    await records.delete("t1.b")
    await listing.after("t1.*", "")
    assert records.listed == 3
    # Another pattern has a listing of its own
    assert await listing.after("t2.*", "") == ["t2.z"]
    assert records.listed == 4


async def test_only_the_patterns_paged_most_recently_are_kept() -> None:
    records = Counted()
    listing = KeyListing(records, kept=2)
    for pattern in ("t1.*", "t2.*", "t1.*", "t3.*", "t1.*", "t2.*"):
        await listing.after(pattern, "")
    # t1 stayed (used again before t3 came), t2 was dropped for t3 and listed again
    assert records.listed == 4

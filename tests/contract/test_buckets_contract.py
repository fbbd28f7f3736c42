"""ports.Buckets: a bucket opened by name is the same bucket however often and by whom it is opened, on the
server (jetcron.bus.kv.ServerBuckets) as on the twin (memory.MemoryBuckets)."""

from __future__ import annotations

from contract_support import Item

from jetcron.bus.ports import Buckets


async def test_a_record_written_through_one_opening_is_read_through_another(buckets: tuple[Buckets, str]) -> None:
    opener, name = buckets
    first = await opener.open(name, Item)
    revision = await first.create("a", Item("a", 1))
    again = await opener.open(name, Item)
    assert (again.name, again.kind) == (name, Item)
    assert await again.get("a") == (Item("a", 1), revision)
    assert await again.keys() == ["a"]

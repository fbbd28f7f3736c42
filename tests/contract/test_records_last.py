"""ports.Records.last (the value written last under a key pattern, in one read) and ports.Records.mark (where the
bucket stands), on the server and on the twin."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from contract_support import Item

from jetcron.bus.ports import Records

MakeRecords = Callable[[], Awaitable[Records[Item]]]


async def test_last_is_the_key_written_last_not_the_highest_with_its_revision(make_records: MakeRecords) -> None:
    items = await make_records()
    assert await items.last("job.*") is None
    await asyncio.gather(*(items.put(f"job.{n:04d}", Item(f"job.{n:04d}", n)) for n in range(300)))
    await items.put("job.0007", Item("job.0007", 1007))  # an old key, written again
    revision = await items.put("job.0123", Item("job.0123", 123))
    assert await items.last("job.*") == (Item("job.0123", 123), revision)
    assert await items.get("job.0123") == (Item("job.0123", 123), revision)


async def test_a_star_is_one_token_so_a_namesake_prefix_does_not_mix(make_records: MakeRecords) -> None:
    items = await make_records()
    mine = await items.put("foo.1", Item("foo.1"))
    theirs = await items.put("foo.bar.2", Item("foo.bar.2"))  # tenant foo's job bar, written after
    assert await items.last("foo.*") == (Item("foo.1"), mine)
    assert await items.last("foo.bar.*") == (Item("foo.bar.2"), theirs)
    assert await items.last("foo.>") == (Item("foo.bar.2"), theirs)
    assert await items.last("bar.*") is None


async def test_a_last_write_that_is_a_delete_is_none(make_records: MakeRecords) -> None:
    items = await make_records()
    await items.put("job.1", Item("job.1"))
    await items.put("job.2", Item("job.2"))
    await items.delete("job.1")
    assert await items.last("job.*") is None
    again = await items.put("job.1", Item("job.1", 2))
    assert await items.last("job.*") == (Item("job.1", 2), again)


async def test_the_mark_moves_with_every_write_and_only_then(make_records: MakeRecords) -> None:
    items = await make_records()
    start = await items.mark()
    await items.maybe("job.1")
    await items.keys("job.*")
    assert await items.mark() == start
    marks = [start]
    await items.put("job.1", Item("job.1"))
    marks.append(await items.mark())
    await items.put("job.1", Item("job.1", 2))  # the same key again: as many messages, a later revision
    marks.append(await items.mark())
    await items.delete("job.1")
    marks.append(await items.mark())
    assert len(set(marks)) == len(marks)
    await items.last("job.*")
    assert await items.mark() == marks[-1]

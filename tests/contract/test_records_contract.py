"""ports.Records: what kv.Store on a real server does and memory.MemoryRecords must do the same."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest
from contract_support import Item

from jetcron.bus.ports import Records
from jetcron.core.errors import NotFound, WriteConflict

MakeRecords = Callable[[], Awaitable[Records[Item]]]


async def test_create_then_get_gives_the_value_and_its_revision(make_records: MakeRecords) -> None:
    items = await make_records()
    revision = await items.create("a", Item("a", 1))
    assert revision > 0
    assert await items.get("a") == (Item("a", 1), revision)


async def test_create_on_an_existing_key_is_a_conflict_and_changes_nothing(make_records: MakeRecords) -> None:
    items = await make_records()
    revision = await items.create("a", Item("a", 1))
    with pytest.raises(WriteConflict, match=rf"^create {items.name}/a: written by someone else first$"):
        await items.create("a", Item("a", 2))
    assert await items.get("a") == (Item("a", 1), revision)


async def test_update_against_a_stale_revision_is_a_conflict_and_changes_nothing(make_records: MakeRecords) -> None:
    items = await make_records()
    first = await items.create("a", Item("a", 1))
    second = await items.update("a", Item("a", 2), first)
    assert second > first
    with pytest.raises(WriteConflict, match=rf"^update {items.name}/a: written by someone else first$"):
        await items.update("a", Item("a", 3), first)
    assert await items.get("a") == (Item("a", 2), second)


async def test_a_missing_key_is_not_found_naming_the_kind_and_key(make_records: MakeRecords) -> None:
    items = await make_records()
    with pytest.raises(NotFound, match=r"^t\d+_item 'nope' not found$"):
        await items.get("nope")
    assert await items.maybe("nope") is None


async def test_delete_leaves_a_marker_and_create_may_follow(make_records: MakeRecords) -> None:
    items = await make_records()
    await items.create("a", Item("a", 1))
    await items.delete("a")
    with pytest.raises(NotFound):
        await items.get("a")
    again = await items.create("a", Item("a", 5))
    assert await items.get("a") == (Item("a", 5), again)


async def test_put_overwrites_whatever_is_stored(make_records: MakeRecords) -> None:
    items = await make_records()
    await items.create("a", Item("a", 1))
    revision = await items.put("a", Item("a", 9))
    assert await items.get("a") == (Item("a", 9), revision)


async def test_revisions_increase_across_the_whole_bucket(make_records: MakeRecords) -> None:
    items = await make_records()
    revisions = [await items.create(key, Item(key)) for key in ("a", "b", "c")]
    revisions.append(await items.put("a", Item("a", 1)))
    assert revisions == sorted(set(revisions))


async def test_keys_follow_subject_wildcards_and_list_deleted_keys_too(make_records: MakeRecords) -> None:
    items = await make_records()
    for key in ("run.a1.x", "run.a2.y", "gang.a1.z", "run.a1.x.deep"):
        await items.put(key, Item(key))
    await items.delete("run.a2.y")
    assert sorted(await items.keys()) == ["gang.a1.z", "run.a1.x", "run.a1.x.deep", "run.a2.y"]
    assert sorted(await items.keys("run.*.*")) == ["run.a1.x", "run.a2.y"]
    assert sorted(await items.keys("run.>")) == ["run.a1.x", "run.a1.x.deep", "run.a2.y"]
    assert sorted(await items.keys("*.a1.*")) == ["gang.a1.z", "run.a1.x"]


async def test_watch_gives_current_values_a_marker_then_changes_in_order(make_records: MakeRecords) -> None:
    items = await make_records()
    await items.put("a", Item("a", 1))
    await items.put("b", Item("b", 1))
    await items.delete("b")
    c = await items.put("c", Item("c", 1))
    watch = items.watch()
    try:
        seen = [await anext(watch) for _ in range(3)]
        assert [(key, value) for key, value, _ in seen] == [("a", Item("a", 1)), ("c", Item("c", 1)), ("", None)]
        assert seen[1][2] == c
        changed = await items.put("a", Item("a", 2))
        await items.delete("c")
        live = [await asyncio.wait_for(anext(watch), 5) for _ in range(2)]
        assert live[0] == ("a", Item("a", 2), changed)
        assert live[1][:2] == ("c", None) and live[1][2] > changed
    finally:
        await watch.aclose()


async def test_watch_of_a_pattern_sees_only_its_keys(make_records: MakeRecords) -> None:
    items = await make_records()
    await items.put("run.x", Item("x"))
    await items.put("job.y", Item("y"))
    watch = items.watch("run.*")
    try:
        assert [(await anext(watch))[0] for _ in range(2)] == ["run.x", ""]
        await items.put("job.z", Item("z"))
        await items.put("run.w", Item("w"))
        assert (await asyncio.wait_for(anext(watch), 5))[:2] == ("run.w", Item("w"))
    finally:
        await watch.aclose()


async def test_concurrent_changes_all_land_through_compare_and_set(make_records: MakeRecords) -> None:
    items = await make_records()
    await items.create("n", Item("n", 0))

    def bump(item: Item) -> Item:
        return Item(item.name, item.count + 1)

    await asyncio.gather(*(items.change("n", bump, tries=50) for _ in range(8)))
    assert (await items.get("n"))[0].count == 8


async def test_change_that_declines_writes_nothing(make_records: MakeRecords) -> None:
    items = await make_records()
    revision = await items.create("n", Item("n", 3))
    assert await items.change("n", lambda item: None) is None
    assert await items.get("n") == (Item("n", 3), revision)


async def test_change_on_a_stale_copy_decides_again_on_the_stored_value(make_records: MakeRecords) -> None:
    items = await make_records()
    first = await items.create("n", Item("n", 1))
    await items.put("n", Item("n", 10))
    old, new, _ = await items.change("n", lambda item: Item("n", item.count + 1), copy=(Item("n", 1), first)) \
        or pytest.fail("change gave up")
    assert (old.count, new.count) == (10, 11)
    assert (await items.get("n"))[0].count == 11


async def test_page_reads_in_order_skips_missing_and_gives_a_cursor(make_records: MakeRecords) -> None:
    items = await make_records()
    for i in range(5):
        await items.put(f"k{i}", Item(f"k{i}", i))
    await items.delete("k1")
    keys = [f"k{i}" for i in range(5)]
    got, cursor = await items.page(keys, 2, lambda item: True)
    assert [i.name for i in got] == ["k0", "k2"] and cursor == "k2"
    rest, end = await items.page(keys[3:], 2, lambda item: True)
    assert [i.name for i in rest] == ["k3", "k4"] and end is None

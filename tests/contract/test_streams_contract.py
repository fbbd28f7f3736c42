"""ports.Streams, on the twin (memory.MemoryStreams) and on the server (streams.ServerStreams): what a stream and a
durable consumer hold, the last value on a subject, purges, a bucket read from its oldest, and new messages
followed."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest
from contract_support import Item, StreamsSide, names

from jetcron.core.errors import NotFound, StorageFull, WriteConflict
from jetcron.wire import subjects as s
from jetcron.wire.codec import encode


async def _stream(side: StreamsSide, **limits: int | float) -> tuple[str, str]:
    n = next(names)
    name, subject = f"ST{n}", f"st{n}"
    await side.make(name, [f"{subject}.>"], **limits)  # type: ignore[arg-type]
    return name, subject


async def test_a_stream_counts_its_messages_and_reports_its_limits(streams_side: StreamsSide) -> None:
    name, subject = await _stream(streams_side, max_msgs=100, max_bytes=1 << 20, max_age=3600.0)
    empty = await streams_side.streams.state(name)
    assert (empty.messages, empty.bytes, empty.first_seq, empty.last_seq) == (0, 0, 0, 0)
    assert (empty.max_msgs, empty.max_bytes, empty.max_age) == (100, 1 << 20, 3600.0)
    seqs = [await streams_side.put(f"{subject}.a", b"x" * 100) for _ in range(3)]
    state = await streams_side.streams.state(name)
    assert seqs == [1, 2, 3]
    assert (state.messages, state.first_seq, state.last_seq) == (3, 1, 3)
    assert state.bytes >= 300


async def test_a_stream_that_does_not_exist_is_not_found(streams_side: StreamsSide) -> None:
    with pytest.raises(NotFound, match="NOPE"):
        await streams_side.streams.state("NOPE")


async def test_a_durable_consumer_counts_what_waits_what_is_unacked_and_its_ack_floor(
        streams_side: StreamsSide) -> None:
    name, subject = await _stream(streams_side)
    await streams_side.durable(name, "work", f"{subject}.>")
    for i in range(5):
        await streams_side.put(f"{subject}.{i}", b"m")
    first = await streams_side.deliver(name, "work", 3)
    assert first == [1, 2, 3]
    for seq in first[:2]:
        await streams_side.ack(name, "work", seq)
    state = await streams_side.streams.consumer(name, "work")
    assert (state.pending, state.ack_pending, state.ack_floor) == (2, 1, 2)
    with pytest.raises(NotFound, match=f"consumer '{name}/other' not found"):
        await streams_side.streams.consumer(name, "other")


async def test_counts_are_per_subject_within_a_filter(streams_side: StreamsSide) -> None:
    name, subject = await _stream(streams_side)
    for leaf in ("a.1", "a.1", "a.2", "b.1"):
        await streams_side.put(f"{subject}.{leaf}", b"m")
    assert await streams_side.streams.counts(name, f"{subject}.a.>") == {f"{subject}.a.1": 2, f"{subject}.a.2": 1}
    assert await streams_side.streams.counts(name, f"{subject}.c.>") == {}


async def test_last_is_the_newest_value_on_a_subject_and_none_after_a_delete_marker(
        streams_side: StreamsSide) -> None:
    name, subject = await _stream(streams_side)
    assert await streams_side.streams.last(name, f"{subject}.k") is None
    await streams_side.put(f"{subject}.k", b"one")
    second = await streams_side.put(f"{subject}.k", b"two", {"X-Kind": "note"})
    await streams_side.put(f"{subject}.other", b"three")
    found = await streams_side.streams.last(name, f"{subject}.k")
    assert found is not None
    assert (found.data, found.seq, (found.headers or {}).get("X-Kind")) == (b"two", second, "note")
    assert found.time is not None
    await streams_side.put(f"{subject}.k", b"", {"KV-Operation": "DEL"})
    assert await streams_side.streams.last(name, f"{subject}.k") is None


async def test_a_write_expecting_a_subjects_last_sequence_is_refused_when_another_came_first(
        streams_side: StreamsSide) -> None:
    _, subject = await _stream(streams_side)
    expect = s.HDR_EXPECTED_LAST_SUBJECT_SEQ
    first = await streams_side.publisher.publish(f"{subject}.k", b"a", headers={expect: "0"})
    await streams_side.publisher.publish(f"{subject}.k", b"b", headers={expect: str(first)})
    with pytest.raises(WriteConflict, match="written by someone else first"):
        await streams_side.publisher.publish(f"{subject}.k", b"c", headers={expect: str(first)})
    with pytest.raises(WriteConflict):
        await streams_side.publisher.publish(f"{subject}.k", b"d", headers={expect: "0"})


async def test_a_full_stream_that_discards_new_refuses_with_storage_full(streams_side: StreamsSide) -> None:
    name, subject = await _stream(streams_side, max_bytes=4096)
    await streams_side.publisher.publish(f"{subject}.a", b"x" * 1000)
    with pytest.raises(StorageFull, match="storage full"):
        for _ in range(10):
            await streams_side.publisher.publish(f"{subject}.a", b"x" * 1000)
    held = await streams_side.streams.state(name)
    assert 1 <= held.messages < 5 and held.bytes <= 4096


async def test_a_purge_lets_go_of_a_subject_or_of_what_is_below_a_sequence(streams_side: StreamsSide) -> None:
    name, subject = await _stream(streams_side)
    for leaf in ("a", "b", "a", "b", "c"):
        await streams_side.put(f"{subject}.{leaf}", b"m")
    await streams_side.streams.purge(name, subject=f"{subject}.a")
    assert await streams_side.streams.counts(name, f"{subject}.>") == {f"{subject}.b": 2, f"{subject}.c": 1}
    await streams_side.streams.purge(name, below=4)
    state = await streams_side.streams.state(name)
    assert (state.messages, state.first_seq, state.last_seq) == (2, 4, 5)
    await streams_side.streams.purge(name, below=1)  # nothing is below the first: nothing goes
    assert (await streams_side.streams.state(name)).messages == 2
    with pytest.raises(ValueError, match="neither a subject nor a sequence"):
        await streams_side.streams.purge(name)
    assert (await streams_side.streams.state(name)).messages == 2


async def test_oldest_reads_a_bucket_the_longest_unwritten_first(streams_side: StreamsSide) -> None:
    bucket = f"jc_t{next(names)}_old"
    await streams_side.make(s.kv_stream(bucket), [s.kv_subject(bucket, ">")], per_subject=1)

    async def put(key: str, data: bytes, headers: dict[str, str] | None = None) -> int:
        return await streams_side.put(s.kv_subject(bucket, key), data, headers)

    await put("a", encode(Item("a", 1)))
    b = await put("b", encode(Item("b")))
    await put("c", encode(Item("c")))
    await put("a", encode(Item("a", 2)))  # rewritten: now the newest
    await put("junk", b"not an item")
    await put("c", b"", {"KV-Operation": "DEL"})
    read = [(key, value, seq) async for key, value, _size, seq in streams_side.streams.oldest(bucket, Item)]
    assert [(key, value) for key, value, _ in read] == [("b", Item("b")), ("a", Item("a", 2))]
    after_b = [key async for key, *_ in streams_side.streams.oldest(bucket, Item, after=b)]
    assert after_b == ["a"]
    # each value's size is what the stream's byte count holds for it: the sizes of all it holds add up to that
    sizes = [size async for _key, _value, size, _seq in streams_side.streams.oldest(bucket, Item)]
    assert sizes[0] == 30 + len(s.kv_subject(bucket, "b")) + len(encode(Item("b")))
    await put("headed", encode(Item("headed")), {"Jc-Note": "a header is stored and counted too"})
    await streams_side.streams.purge(s.kv_stream(bucket), subject=s.kv_subject(bucket, "junk"))
    await streams_side.streams.purge(s.kv_stream(bucket), subject=s.kv_subject(bucket, "c"))
    sizes = [size async for _key, _value, size, _seq in streams_side.streams.oldest(bucket, Item)]
    assert sum(sizes) == (await streams_side.streams.state(s.kv_stream(bucket))).bytes


async def test_tail_follows_the_messages_stored_from_now_on_in_order(streams_side: StreamsSide) -> None:
    _, subject = await _stream(streams_side)
    await streams_side.put(f"{subject}.ev.x", b"before")
    tail = streams_side.streams.tail(f"{subject}.ev.>")
    first = asyncio.ensure_future(anext(tail))
    # The tail starts following when it is first asked; until then nothing here is its, so put until it sees one.
    sent = 0
    while not first.done():
        await streams_side.put(f"{subject}.ev.x", str(sent).encode())
        sent += 1
        await asyncio.wait({first}, timeout=0.05)
    got = [(await first).data]
    await streams_side.put(f"{subject}.other", b"not followed")
    await streams_side.put(f"{subject}.ev.y", b"last")
    while got[-1] != b"last":
        got.append((await asyncio.wait_for(anext(tail), 5)).data)
    await tail.aclose()
    assert b"before" not in got
    numbered = [int(d) for d in got[:-1]]
    assert numbered == list(range(numbered[0], sent)) and got[-1] == b"last"


async def test_read_gives_what_is_stored_then_what_comes_with_how_many_more_and_a_none_when_quiet(
        streams_side: StreamsSide) -> None:
    _, subject = await _stream(streams_side)
    await streams_side.put(f"{subject}.r.1", b"one")
    await streams_side.put(f"{subject}.other", b"not read")
    await streams_side.put(f"{subject}.r.2", b"two")
    reader = streams_side.streams.read(f"{subject}.r.>", idle=0.2)
    try:
        got = [await anext(reader) for _ in range(3)]
        assert [(r[0].data, r[1]) if r else None for r in got] == [(b"one", 1), (b"two", 0), None]
        await streams_side.put(f"{subject}.r.3", b"three")
        later = await anext(reader)
        assert later is not None and (later[0].data, later[0].subject, later[1]) == (b"three", f"{subject}.r.3", 0)
    finally:
        await reader.aclose()


async def test_read_after_a_sequence_gives_only_what_was_stored_after_it_each_with_its_sequence(
        streams_side: StreamsSide) -> None:
    _, subject = await _stream(streams_side)
    seqs = [await streams_side.put(f"{subject}.r.{i % 2}", f"m{i}".encode()) for i in range(4)]
    await streams_side.put(f"{subject}.other", b"not read")

    async def read(after: int) -> list[tuple[bytes, int, int]]:
        reader = streams_side.streams.read(f"{subject}.r.>", idle=0.2, after=after)
        got: list[tuple[bytes, int, int]] = []
        try:
            while (item := await anext(reader)) is not None:
                got.append((item[0].data, int(item[0].metadata.sequence.stream), item[1]))
        finally:
            await reader.aclose()
        return got

    assert await read(0) == [(b"m0", seqs[0], 3), (b"m1", seqs[1], 2), (b"m2", seqs[2], 1), (b"m3", seqs[3], 0)]
    assert await read(seqs[1]) == [(b"m2", seqs[2], 1), (b"m3", seqs[3], 0)]
    assert await read(seqs[3]) == []
    later = await streams_side.put(f"{subject}.r.1", b"m4")
    assert await read(seqs[3]) == [(b"m4", later, 0)]


async def test_newest_reads_the_last_messages_of_the_stream_that_are_on_the_subject(
        streams_side: StreamsSide) -> None:
    name, subject = await _stream(streams_side)
    assert await streams_side.streams.newest(name, f"{subject}.a", 3) == []
    for body, leaf in ((b"a1", "a"), (b"b1", "b"), (b"a2", "a"), (b"b2", "b"), (b"a3", "a")):
        await streams_side.put(f"{subject}.{leaf}", body)
    assert await streams_side.streams.newest(name, f"{subject}.a", 3) == [b"a2", b"a3"]
    assert await streams_side.streams.newest(name, f"{subject}.>", 10) == [b"a1", b"b1", b"a2", b"b2", b"a3"]


async def test_written_since_reads_by_the_storages_own_time_up_to_a_cap(streams_side: StreamsSide) -> None:
    name, subject = await _stream(streams_side)
    assert await streams_side.streams.written_since(name, f"{subject}.>", datetime.now(UTC), 10) == ([], False)
    for i in range(5):
        await streams_side.put(f"{subject}.w.{i}", str(i).encode())
    third = await streams_side.streams.last(name, f"{subject}.w.2")
    assert third is not None and third.time is not None
    msgs, more = await streams_side.streams.written_since(name, f"{subject}.w.>", third.time, 10)
    assert [m.data for m in msgs] == [b"2", b"3", b"4"] and not more
    assert [m.subject for m in msgs] == [f"{subject}.w.{m.data.decode()}" for m in msgs]
    capped, more = await streams_side.streams.written_since(name, f"{subject}.w.>", third.time, 1)
    assert [m.data for m in capped] == [b"2"] and more

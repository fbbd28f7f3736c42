"""jetcron.core.timing.due_index: entries come due per shard, each once, and a later set replaces an earlier one."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from jetcron.core.ids import shard_of
from jetcron.core.timing.due_index import DueIndex

T0 = datetime(2026, 12, 4, tzinfo=UTC)


def test_one_shard_holds_every_entry_and_gives_each_once_in_time_order() -> None:
    index = DueIndex(1)
    index.set("b", T0 + timedelta(seconds=2))
    index.set("a", T0 + timedelta(seconds=1))
    index.set("c", T0 + timedelta(seconds=9))
    index.set("b", T0 + timedelta(seconds=3))  # moved later: the earlier entry is stale
    assert index.shard("anything") == 0 and len(index) == 3
    assert index.next_wake({0}) == T0 + timedelta(seconds=1)
    assert index.pop_due(0, T0 + timedelta(seconds=3)) == ["a", "b"]
    assert index.pop_due(0, T0 + timedelta(seconds=3)) == []
    index.set("c", None)
    assert index.next_wake({0}) is None and len(index) == 0


def test_many_shards_place_a_job_where_shard_of_says() -> None:
    index = DueIndex(8)
    names = [f"job-{i}" for i in range(40)]
    for name in names:
        index.set(name, T0)
    for shard in range(8):
        assert sorted(index.pop_due(shard, T0)) == sorted(n for n in names if shard_of(n, 8) == shard)
    assert len(index) == 0

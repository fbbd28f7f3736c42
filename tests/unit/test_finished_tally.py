"""Finished runs per minute (jetcron.core.lifecycle.finished, jetcron_services.run_tracker.finished): each end counted
once, in its minute, by outcome, for the cluster and its tenant; written as records that are only ever raised."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any, cast
from zoneinfo import ZoneInfo

import msgspec

from jetcron.bus.memory import MemoryRecords
from jetcron.config import Settings
from jetcron.core.clock import ManualClock
from jetcron.core.errors import Unavailable
from jetcron.core.lifecycle.finished import (
    FinishedMinute,
    Tally,
    dense,
    first_minute,
    merged,
    minute_of,
    parse_stamp,
    stamp,
)
from jetcron.core.lifecycle.runs import new_run
from jetcron.core.models import JobSpec, Run, RunState
from jetcron.wire import subjects as s
from jetcron_services.run_tracker.finished import FinishedCounts
from jetcron_services.run_tracker.reconciler import Reconciler
from jetcron_services.run_tracker.records import Records
from jetcron_services.runtime import Context

T0 = datetime(2027, 3, 1, 12, 0, 0, tzinfo=UTC)
SPEC = JobSpec(name="j", command=["true"], tenant="acme")


def _run(n: int, state: RunState, finished: datetime | None, *, tenant: str = "acme",
         created: datetime | None = None) -> Run:
    due = T0 - timedelta(minutes=5)
    return Run(run_id=f"{tenant}.j.{n}", job=f"{tenant}.j", tenant=tenant, state=state, scheduled_at=due, due_at=due,
               created_at=created or due, finished_at=finished)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def test_minutes_and_their_stamps() -> None:
    assert minute_of(datetime(2027, 3, 1, 13, 59, 59, 999_000, tzinfo=UTC)) == datetime(2027, 3, 1, 13, 59,
                                                                                          tzinfo=UTC)
    berlin = datetime(2027, 3, 1, 13, 5, 30, tzinfo=UTC).astimezone(ZoneInfo("Europe/Berlin"))
    assert minute_of(berlin) == datetime(2027, 3, 1, 13, 5, tzinfo=UTC)
    assert stamp(at(61)) == "202703011201" and parse_stamp("202703011201") == at(60)
    assert parse_stamp("2027-03-01") is None and parse_stamp("*") is None
    assert first_minute(at(30), 60) == T0 - timedelta(minutes=59)
    assert s.finished_key(None, "202703011201") == "all.202703011201"
    assert s.finished_key("acme", "202703011201") == "tenant.acme.202703011201"
    assert s.finished_filter("acme") == "tenant.acme.*" and s.finished_filter(None) == "all.*"
    assert s.parse_finished_key("tenant.acme.202703011201") == ("acme", "202703011201")
    assert s.parse_finished_key("all.202703011201") == (None, "202703011201")


def test_merged_takes_the_larger_of_each_count() -> None:
    assert merged({"succeeded": 5, "failed": 1}, {"succeeded": 3, "dead": 2}) == {"dead": 2, "failed": 1,
                                                                                  "succeeded": 5}
    assert merged({}, {}) == {}


def test_a_run_that_ends_live_is_counted_once_in_its_minute_for_the_cluster_and_its_tenant() -> None:
    tally = Tally()
    assert tally.seen(_run(1, RunState.SUCCEEDED, at(10)), was_live=True, now=at(11))
    assert tally.seen(_run(2, RunState.DEAD, at(59.999)), was_live=True, now=at(61))
    assert tally.seen(_run(3, RunState.FAILED, at(60)), was_live=True, now=at(61))
    assert tally.seen(_run(4, RunState.CANCELLED, at(70), tenant="bolt"), was_live=True, now=at(71))
    assert not tally.seen(_run(5, RunState.RUNNING, None), was_live=True, now=at(71))
    taken = {(scope, value.minute): value.counts for scope, value in tally.take()}
    assert taken == {
        (None, T0): {"dead": 1, "succeeded": 1}, ("acme", T0): {"dead": 1, "succeeded": 1},
        (None, at(60)): {"cancelled": 1, "failed": 1}, ("acme", at(60)): {"failed": 1},
        ("bolt", at(60)): {"cancelled": 1}}
    assert tally.take() == []  # nothing changed since
    tally.seen(_run(6, RunState.SUCCEEDED, at(20)), was_live=True, now=at(80))
    assert [(scope, v.minute, v.counts) for scope, v in tally.take()] == [
        (None, T0, {"dead": 1, "succeeded": 2}), ("acme", T0, {"dead": 1, "succeeded": 2})]


def test_a_later_write_to_an_ended_record_is_not_a_second_end() -> None:
    tally = Tally()
    # Ended while this replica watched: counted; a deadline recorded on it later is not its index's any more.
    ended = _run(1, RunState.CANCELLED, at(5))
    assert tally.seen(ended, was_live=True, now=at(5))
    assert not tally.seen(msgspec.structs.replace(ended, missed=["start"]), was_live=False, now=at(30))
    # Made terminal at birth (a skipped occurrence): counted when seen, not again when a deadline is recorded on it,
    # neither soon after (it is remembered) nor long after (it is older than the guard).
    skipped = new_run(SPEC, run_id="acme.j.skip", state=RunState.SKIPPED, scheduled_at=at(8), due_at=at(8), now=at(8))
    assert tally.seen(skipped, was_live=False, now=at(9))
    marked = msgspec.structs.replace(skipped, missed=["start"])
    assert not tally.seen(marked, was_live=False, now=at(40))
    tally.trim(at(400))
    assert "acme.j.skip" not in tally.recent
    assert not tally.seen(marked, was_live=False, now=at(400))
    # A record that ended before this replica watched (counted from the initial values), written again
    loaded = _run(2, RunState.SUCCEEDED, at(1))
    assert tally.loaded(loaded, now=at(2))
    assert not tally.seen(msgspec.structs.replace(loaded, missed=["start"]), was_live=False, now=at(3))
    blocked = new_run(SPEC, run_id="acme.j.blocked", state=RunState.BLOCKED, scheduled_at=at(50), due_at=at(50),
                      now=at(50))
    assert tally.seen(blocked, was_live=False, now=at(51))
    counts = {(scope, v.minute): v.counts for scope, v in tally.take()}
    assert counts[(None, T0)] == {"blocked": 1, "cancelled": 1, "skipped": 1, "succeeded": 1}


def test_a_run_whose_live_revisions_the_watch_skipped_is_counted_once_when_its_end_is_seen() -> None:
    # Given a run created and ended between two deliveries of a lagging runs watch: the bucket kept only its end,
    # so this replica's index never held it as live
    tally = Tally()
    quick = _run(7, RunState.SUCCEEDED, at(10))
    # When its terminal record arrives (within GUARD of its end), then it is counted, once
    assert tally.seen(quick, was_live=False, now=at(10.2))
    assert not tally.seen(quick, was_live=False, now=at(11))  # delivered again, or written again soon after
    assert not tally.seen(msgspec.structs.replace(quick, missed=["start"]), was_live=False, now=at(200))
    assert [(scope, v.counts) for scope, v in tally.take()] == [(None, {"succeeded": 1}), ("acme", {"succeeded": 1})]


def test_the_initial_values_count_what_ended_within_the_window() -> None:
    tally = Tally(window=timedelta(hours=2))
    now = at(3600)
    assert tally.loaded(_run(1, RunState.SUCCEEDED, now - timedelta(minutes=119)), now)
    assert not tally.loaded(_run(2, RunState.SUCCEEDED, now - timedelta(minutes=121)), now)
    assert not tally.loaded(_run(3, RunState.RUNNING, None), now)
    # A finish reported long after the fact (every tracker down for hours) is past the window: not counted.
    assert not tally.seen(_run(4, RunState.FAILED, now - timedelta(hours=3)), was_live=True, now=now)
    assert sum(v.total for scope, v in tally.take() if scope is None) == 1


def test_trim_forgets_minutes_that_left_the_window() -> None:
    tally = Tally(window=timedelta(minutes=10))
    tally.seen(_run(1, RunState.SUCCEEDED, at(0)), was_live=True, now=at(0))
    tally.seen(_run(2, RunState.SUCCEEDED, at(300)), was_live=True, now=at(300))
    tally.trim(at(660))
    assert {minute for _, minute in tally.counts} == {at(300)}
    assert [v.minute for _, v in tally.take()] == [at(300), at(300)]


def test_dense_fills_every_minute_of_the_span_oldest_first() -> None:
    items = [FinishedMinute(minute=T0 - timedelta(minutes=2), counts={"succeeded": 2}),
             FinishedMinute(minute=T0, counts={"failed": 1, "succeeded": 1}),
             FinishedMinute(minute=T0 - timedelta(minutes=60), counts={"succeeded": 9})]  # before the span
    minutes = dense(items, at(59), 60)
    assert len(minutes) == 60 and minutes[0].minute == T0 - timedelta(minutes=59) and minutes[-1].minute == T0
    assert minutes[-1].counts == {"failed": 1, "succeeded": 1} and minutes[-3].counts == {"succeeded": 2}
    assert sum(m.total for m in minutes) == 4


# --- the tracker's writes, on the twin bucket -----------------------------------------------------------------


def _counts(ctx_clock: ManualClock) -> tuple[FinishedCounts, MemoryRecords[FinishedMinute]]:
    store = MemoryRecords(s.BUCKET_FINISHED, FinishedMinute)
    ctx = cast(Context, SimpleNamespace(clock=ctx_clock, log=SimpleNamespace(warning=lambda *a, **k: None)))
    return FinishedCounts(ctx, store), store


async def _stored(store: MemoryRecords[FinishedMinute], key: str) -> dict[str, int]:
    found = await store.maybe(key)
    return {} if found is None else found[0].counts


async def test_the_leader_writes_each_changed_minute_once_a_second_and_only_raises_a_record() -> None:
    clock = ManualClock(at(1))
    counts, store = _counts(clock)
    for n in range(3):
        counts.noted(_run(n, RunState.SUCCEEDED, at(1)), True, True)
    assert await counts.maybe_flush(clock.now(), write=False) == 0  # a standby counts, never writes
    assert await store.keys() == []
    clock.advance(1)
    assert await counts.maybe_flush(clock.now(), write=True) == 2  # the cluster's minute and acme's
    assert await _stored(store, "all.202703011200") == {"succeeded": 3}
    assert await counts.maybe_flush(clock.now(), write=True) == 0  # not a second yet
    counts.noted(_run(9, RunState.FAILED, at(2)), True, True)
    clock.advance(1)
    assert await counts.maybe_flush(clock.now(), write=True) == 2
    assert await _stored(store, "tenant.acme.202703011200") == {"failed": 1, "succeeded": 3}
    # Another replica that saw less (it started after some records were let go) takes over: it lowers nothing.
    late, _ = _counts(clock)
    late.store = store
    late.noted(_run(1, RunState.SUCCEEDED, at(1)), True, True)
    late.noted(_run(20, RunState.DEAD, at(3)), True, True)
    clock.advance(1)
    assert await late.maybe_flush(clock.now(), write=True) == 2
    assert await _stored(store, "all.202703011200") == {"dead": 1, "failed": 1, "succeeded": 3}
    # The first one, leading again with a stale copy: its write is refused, the record read and raised.
    counts.noted(_run(21, RunState.SUCCEEDED, at(4)), True, True)
    clock.advance(1)
    assert await counts.maybe_flush(clock.now(), write=True) == 2
    assert await _stored(store, "all.202703011200") == {"dead": 1, "failed": 1, "succeeded": 4}


async def test_a_minute_whose_write_fails_is_written_at_the_next_flush() -> None:
    clock = ManualClock(at(1))
    failing = {"on": True}

    async def refuse(op: str, key: str) -> None:
        if failing["on"]:
            raise Unavailable("the server is electing a leader")

    counts, store = _counts(clock)
    store.before_write = refuse
    counts.noted(_run(1, RunState.SUCCEEDED, at(1)), True, True)
    assert await counts.maybe_flush(clock.now(), write=True) == 0
    failing["on"] = False
    clock.advance(1)
    assert await counts.maybe_flush(clock.now(), write=True) == 2
    assert await _stored(store, "tenant.acme.202703011200") == {"succeeded": 1}


def test_the_reconciler_tells_of_every_terminal_record_and_whether_it_held_the_run() -> None:
    clock = ManualClock(at(10))
    counts, _ = _counts(clock)
    ctx = cast(Context, SimpleNamespace(settings=Settings(), clock=clock))
    reconciler = Reconciler(ctx, cast(Records, None))
    told: list[tuple[str, bool, bool]] = []

    def noted(run: Run, was_live: bool, synced: bool) -> None:
        told.append((run.run_id, was_live, synced))
        counts.noted(run, was_live, synced)

    reconciler.ended = noted
    before = _run(0, RunState.FAILED, at(2))  # an initial value: ended before the watch began
    reconciler.on_record(before.run_id, before, 1)
    reconciler.synced.set()
    live = _run(1, RunState.SCHEDULED, None)
    reconciler.on_record(live.run_id, live, 2)
    ended = msgspec.structs.replace(live, state=RunState.SUCCEEDED, finished_at=at(9))
    reconciler.on_record(live.run_id, ended, 3)
    reconciler.on_record(live.run_id, msgspec.structs.replace(ended, missed=["finish"]), 4)
    assert told == [(before.run_id, False, False), (live.run_id, True, True), (live.run_id, False, True)]
    totals: dict[str, Any] = {str(scope): v.counts for scope, v in counts.tally.take()}
    assert totals["None"] == {"failed": 1, "succeeded": 1}

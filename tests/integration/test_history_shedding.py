"""Storage pressure's walk through the runs bucket, on a real server: it lets go only ended runs past their gate,
and a long stretch of records that may not go (dead runs, kept for their dead letters) at the bucket's start does
not hide the ones behind it: each walk goes on from where the last one stopped."""

from __future__ import annotations

import math
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any, cast

import nats
import pytest
import structlog
from nats.js import JetStreamContext

from jetcron.bus import storage
from jetcron.bus.server import EmbeddedNats
from jetcron.bus.storage import SERVER, Usage
from jetcron.bus.streams import ServerStreams
from jetcron.bus.topology import ensure_topology
from jetcron.config import Settings
from jetcron.core.ids import run_id
from jetcron.core.models import Run, RunState
from jetcron.wire import subjects as s
from jetcron.wire.codec import encode
from jetcron_services.run_tracker import history
from jetcron_services.run_tracker.history import StorageKeeper

NOW = datetime.now(UTC)


def _run(n: int, state: RunState, ended_ago: timedelta) -> Run:
    at = NOW - timedelta(days=2) + timedelta(seconds=n)
    return Run(run_id=run_id("j", at), job="j", state=state, scheduled_at=at, due_at=at, created_at=at,
               finished_at=None if not state.terminal else NOW - ended_ago)


async def _store(js: JetStreamContext, runs: list[Run]) -> None:
    """The runs bucket (jetcron's topology) holding `runs`, in order."""
    await ensure_topology(js)
    for run in runs:
        await js.publish(s.kv_subject(s.BUCKET_RUNS, run.run_id), encode(run))


@pytest.fixture
async def js(nats_server: EmbeddedNats) -> AsyncIterator[JetStreamContext]:
    """A JetStream context on the test's own server."""
    nc = await nats.connect(nats_server.url)
    try:
        yield nc.jetstream(timeout=5)
    finally:
        await nc.close()


def _keeper(js: JetStreamContext, settings: Settings, step: float | None = None) -> StorageKeeper:
    """The tracker's storage keeper on the real streams; with `step`, a clock that moves that much per look."""
    ctx: Any = SimpleNamespace(streams=ServerStreams(js), settings=settings, log=structlog.get_logger("test"),
                               history=SimpleNamespace(cluster=settings.history))
    if step is None:
        return StorageKeeper(cast(Any, ctx))
    ticks = iter(range(10**6))
    return StorageKeeper(cast(Any, ctx), monotonic=lambda: next(ticks) * step)


async def test_each_walk_goes_on_past_records_that_may_not_go(js: JetStreamContext,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    # Given a runs bucket whose oldest 30 records are dead runs and a live one, then 30 ended a day ago, then 5
    # that ended a minute ago (inside their gate)
    monkeypatch.setattr(history, "SHED_WALK", 20)
    kept = [_run(i, RunState.DEAD, timedelta(days=1)) for i in range(29)] + [_run(29, RunState.RUNNING, timedelta(0))]
    old = [_run(30 + i, RunState.SUCCEEDED, timedelta(days=1)) for i in range(30)]
    recent = [_run(60 + i, RunState.FAILED, timedelta(minutes=1)) for i in range(5)]
    await _store(js, [*kept, *old, *recent])
    keeper = _keeper(js, Settings())
    # When pressure asks for more than can be freed, walk after walk (20 records each at most)
    removed = [(await keeper._shed_runs(10**9, NOW)).removed for _ in range(4)]
    # Then the first walk met only what may not go, the next ones went on behind it, and a walk that reached
    # the end starts again from the oldest
    assert removed[0] == 0 and sum(removed) == 30
    left = set((await js.stream_info(s.kv_stream(s.BUCKET_RUNS), subjects_filter=">")).state.subjects or {})
    assert left == {s.kv_subject(s.BUCKET_RUNS, r.run_id) for r in [*kept, *recent]}
    assert keeper.walked_to == 0


async def test_a_walk_stops_at_its_time_budget_and_the_next_comes_at_once(js: JetStreamContext) -> None:
    # Given 200 runs that ended a day ago, and a leader whose lease TTL is 3 s (a walk's budget: 1 s)
    await _store(js, [_run(i, RunState.SUCCEEDED, timedelta(days=1)) for i in range(200)])
    keeper = _keeper(js, Settings(leader_lease_ttl=3.0), step=0.01)  # 10 ms per look at it
    # When pressure asks for more than one walk's budget can let go
    first = (await keeper._shed_runs(10**9, NOW)).removed
    # Then the walk stops at its budget (100 looks), what it chose is gone, and the next check is due at once
    assert 90 <= first <= 110 and keeper.behind
    left = (await js.stream_info(s.kv_stream(s.BUCKET_RUNS))).state.messages
    assert left == 200 - first
    keeper.last, soon = NOW, NOW + timedelta(seconds=1)
    await keeper.maybe_check(soon)  # not due by the clock (every 15 s): due because the last walk was cut short
    assert keeper.last == soon and not keeper.behind  # no pressure now (no limit is near): nothing more wanted
    await keeper.maybe_check(soon + timedelta(seconds=1))
    assert keeper.last == soon


async def test_a_walk_that_finds_nothing_to_let_go_does_not_come_again_at_once(js: JetStreamContext) -> None:
    # Given 50 runs still running (nothing may go), and a walk's budget of 1 s
    await _store(js, [_run(i, RunState.RUNNING, timedelta(0)) for i in range(50)])
    keeper = _keeper(js, Settings(leader_lease_ttl=3.0), step=0.1)  # 100 ms per look at it
    # When pressure asks for room and the walk runs out of time having let nothing go
    assert (await keeper._shed_runs(10**9, NOW)).removed == 0
    # Then the next check waits for its time, not for the next turn of the leader's loop
    assert not keeper.behind and (await js.stream_info(s.kv_stream(s.BUCKET_RUNS))).state.messages == 50


async def test_room_the_server_wanted_is_let_go_once_though_its_figure_falls_behind(
        js: JetStreamContext, monkeypatch: pytest.MonkeyPatch) -> None:
    # Given 200 runs that ended a day ago, a walk's budget of 10 looks, and a server store whose figure does not fall
    # after purges (its file blocks are compacted later): it asks for 30 runs' worth of room, pass after pass
    await _store(js, [_run(i, RunState.SUCCEEDED, timedelta(days=1)) for i in range(200)])
    size = (await js.stream_info(s.kv_stream(s.BUCKET_RUNS))).state.bytes / 200
    limit = int(300 * size)  # at the shed line (80 %), room is wanted down to 70 %: 30 runs

    async def lagging(*_: object) -> Usage:
        return Usage(stream=SERVER, used=math.ceil(0.8 * limit), limit=limit)

    monkeypatch.setattr(storage, "server_usage", lagging)
    keeper = _keeper(js, Settings(leader_lease_ttl=3.0, storage_shed_at=0.8), step=0.1)

    # When the tracker leader's loop turns, a second apart, for 15 s (a check is due by the clock every 15 s)
    passes = 0
    for second in range(15):
        before = keeper.last
        await keeper.maybe_check(NOW + timedelta(seconds=second))
        passes += keeper.last != before

    # Then the 30 runs' worth went in a few passes, each going on with what was still wanted, and no more went
    # while the server's figure stood still: the next look at it is the next check due by the clock
    left = (await js.stream_info(s.kv_stream(s.BUCKET_RUNS))).state.messages
    assert (200 - left, passes) == (30, 3)
    assert not keeper.behind and keeper.server_owed is None

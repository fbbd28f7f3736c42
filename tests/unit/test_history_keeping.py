"""The parts of history keeping around the pure rules: the settings' bounds, how an existing stream's limits are
brought to the settings (never below what it holds), and what the services stamp and write (on the twins)."""

from __future__ import annotations

from datetime import UTC, datetime

import msgspec
import pytest
from nats.js.api import DiscardPolicy, StreamConfig
from pydantic import ValidationError
from twin_support import twin_context

from jetcron.bus.topology import Limits, stream_configs, upgrade
from jetcron.config import Settings
from jetcron.core.lifecycle.retention import ClusterHistory
from jetcron.core.lifecycle.runs import new_run
from jetcron.core.models import HistoryPolicy, JobSpec, RunState, Schedule, ScheduleKind, TenantPolicy
from jetcron.ops.retention import History

T0 = datetime(2026, 12, 5, 12, 0, tzinfo=UTC)


def test_the_clusters_retention_must_lie_between_its_floor_and_ceiling() -> None:
    with pytest.raises(ValidationError, match=r"JETCRON_HISTORY_KEEP_SECONDS \(60\) must lie between"):
        Settings(history_keep_seconds=60, history_min_seconds=3600)
    with pytest.raises(ValidationError, match="JETCRON_HISTORY_MAX_SECONDS"):
        Settings(history_keep_seconds=10**9)
    assert Settings(history_keep_seconds=120, history_min_seconds=60).history.keep_seconds == 120


def test_every_stream_limit_comes_from_a_setting() -> None:
    settings = Settings(runs_max_bytes=5 * 2**20, events_max_bytes=6 * 2**20, logs_max_bytes=7 * 2**20,
                        dlq_keep_seconds=86400, history_max_seconds=10 * 86400, place_queue_max=99)
    by_name = {c.name: c for c in stream_configs(1, settings.limits)}
    assert by_name["JC_EVENTS"].max_bytes == 6 * 2**20 and by_name["JC_EVENTS"].max_age == 10 * 86400
    assert by_name["JC_LOGS"].max_bytes == 7 * 2**20 and by_name["JC_DLQ"].max_age == 86400
    assert by_name["JC_PLACE"].max_msgs == 99
    assert settings.limits.runs_bytes == 5 * 2**20
    # 0: no limit of its own (the server's store bounds it; JetStream reserves nothing for it)
    assert {c.name: c.max_bytes for c in stream_configs(1, Limits())}["JC_EVENTS"] == -1


def _stream(**kw: object) -> StreamConfig:
    return StreamConfig(name="S", subjects=["s.>"], discard=DiscardPolicy.NEW, **kw)  # type: ignore[arg-type]


def test_an_upgrade_raises_limits_in_place_and_says_so() -> None:
    current = _stream(max_bytes=2**30, max_age=7 * 86400.0, allow_msg_ttl=False)
    desired = _stream(max_bytes=-1, max_age=90 * 86400.0, allow_msg_ttl=True)
    config, notes = upgrade(current, desired, held_bytes=2**29, held_msgs=10)
    assert config is not None and config.max_bytes == -1 and config.max_age == 90 * 86400 and config.allow_msg_ttl
    assert [n.text for n in notes] == ["S: max_bytes 1073741824 -> -1", "S: max_age 604800.0 -> 7776000.0",
                                       "S: allow_msg_ttl False -> True"]
    assert not any(n.refused for n in notes)


def test_an_upgrade_never_sets_a_limit_below_what_the_stream_holds() -> None:
    current = _stream(max_bytes=2**30, max_msgs=1000)
    desired = _stream(max_bytes=2**20, max_msgs=10)
    config, notes = upgrade(current, desired, held_bytes=5 * 2**20, held_msgs=500)
    assert config is None  # neither limit may shrink below what is held: nothing to update
    assert all(n.refused for n in notes) and len(notes) == 2
    assert "max_bytes stays 1073741824: it holds 5242880 bytes, more than the 1048576 asked" in notes[0].text


def test_an_upgrade_of_a_stream_already_current_changes_nothing() -> None:
    same = _stream(max_bytes=2**20, max_age=60.0)
    assert upgrade(same, same, 10, 1) == (None, [])


async def test_a_new_run_is_stamped_with_its_tenants_retention_read_at_most_every_refresh() -> None:
    ctx = twin_context()
    clock = [0.0]
    history = History(ctx.tenants, ClusterHistory(keep_seconds=3 * 86400, min_seconds=3600), lambda: clock[0],
                      refresh=30)
    spec = JobSpec(name="n", command=["true"], tenant="acme", schedule=Schedule(kind=ScheduleKind.NOW))
    assert await history.keep_for(spec) == 3 * 86400  # no tenant policy: the cluster's
    await ctx.tenants.put("acme", TenantPolicy(tenant="acme", history=HistoryPolicy(keep_seconds=86400)))
    clock[0] = 29.0
    assert await history.keep_for(spec) == 3 * 86400  # read 29 s ago: not yet again
    clock[0] = 30.0
    assert await history.keep_for(spec) == 86400
    own = msgspec.structs.replace(spec, history=HistoryPolicy(keep_seconds=7200))
    assert await history.keep_for(own) == 7200  # the job's own wins


async def test_the_run_records_store_writes_an_ended_run_with_its_ttl_and_a_live_one_without() -> None:
    ctx = twin_context()
    spec = JobSpec(name="n", command=["true"])
    live = new_run(spec, run_id="n.20261205T120000000Z", state=RunState.SCHEDULED, scheduled_at=T0, due_at=T0,
                   now=T0, keep_seconds=86400)
    await ctx.runs.create(live.run_id, live)
    skipped = new_run(spec, run_id="n.20261205T120100000Z", state=RunState.SKIPPED, scheduled_at=T0, due_at=T0,
                      now=datetime.now(UTC), keep_seconds=86400, reason="misfire")
    await ctx.runs.create(skipped.run_id, skipped)
    ttls = ctx.runs.ttls  # type: ignore[attr-defined]
    assert ttls[live.run_id] is None
    assert 86390 <= ttls[skipped.run_id] <= 86400

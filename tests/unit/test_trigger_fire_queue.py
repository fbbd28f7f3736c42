"""The trigger's fire loop: at most FIRES_IN_FLIGHT jobs fire at once, the rest wait in the order they came
due, and none is planned twice at once. `_plan_and_record` is replaced by a probe; everything else is the
service's own loop."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any, cast

import pytest

from jetcron.config import Settings
from jetcron.core.clock import ManualClock
from jetcron_services.runtime import Context
from jetcron_services.trigger import service
from jetcron_services.trigger.service import Trigger


class Probe:
    def __init__(self) -> None:
        self.running = 0
        self.most = 0
        self.started: list[str] = []
        self.release = asyncio.Event()

    async def plan_and_record(self, name: str) -> None:
        self.started.append(name)
        self.running += 1
        self.most = max(self.most, self.running)
        await self.release.wait()
        self.running -= 1


async def test_jobs_beyond_the_limit_wait_in_order_without_a_task_each(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(service, "FIRES_IN_FLIGHT", 3)
    clock = ManualClock()
    ctx = cast(Context, SimpleNamespace(settings=Settings(trigger_shards=1), clock=clock, stop=asyncio.Event(),
                                        leases=None, runs=None, buckets=None,
                                        log=SimpleNamespace(exception=lambda *a, **k: None)))
    trigger = Trigger(ctx, "t1")
    trigger.owner.owned[0] = cast(Any, "the one shard, held")
    trigger.synced.set()
    trigger.cursors_synced.set()
    trigger.calendars_synced.set()
    probe = Probe()
    monkeypatch.setattr(trigger, "_plan_and_record", probe.plan_and_record)
    names = [f"job-{i:02d}" for i in range(10)]
    for name in names:
        trigger.index.set(name, clock.now())
    loop = asyncio.create_task(trigger.fire_loop())
    for _ in range(5):
        await asyncio.sleep(0)
    assert probe.started == names[:3] and list(trigger.pending) == names[3:]
    firing = [t for t in asyncio.all_tasks() if getattr(t.get_coro(), "__qualname__", "") == "Trigger._fire"]
    assert len(firing) == 3  # none for the jobs that wait
    assert trigger.in_flight == set(names)

    trigger.index.set("job-01", clock.now())  # due again while it fires: planned once more afterwards
    trigger.wake.set()
    for _ in range(5):
        await asyncio.sleep(0)
    assert "job-01" in trigger.again and probe.started.count("job-01") == 1

    probe.release.set()
    for _ in range(50):
        await asyncio.sleep(0)
    assert probe.started[:10] == names and probe.started[10:] == ["job-01"]
    assert probe.most == 3 and not trigger.pending and not trigger.in_flight and trigger.firing == 0
    ctx.stop.set()
    trigger.wake.set()
    await asyncio.wait_for(loop, 5)

"""Two trigger replicas: every nominal occurrence of an interval job gets exactly one run, also across a failover."""

from __future__ import annotations

import asyncio
import json
from datetime import datetime, timedelta
from itertools import pairwise
from typing import Any

import nats
from harness import Services, run_cli, wait_for
from metrics_support import samples

from jetcron.bus import lease as lease_store
from jetcron.bus.registry import Registry
from jetcron.core.ids import run_id, shard_of
from jetcron.sdk.client import Client

SHARDS = 16  # the default JETCRON_TRIGGER_SHARDS
SECOND = timedelta(seconds=1)


def at(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


async def records(client: Client, job: str) -> list[dict[str, Any]]:
    return sorted((await client.call("runs.list", {"job": job}))["items"], key=lambda r: r["scheduled_at"])


async def shard_holders(url: str) -> dict[int, str]:
    """Which replica holds each trigger shard lease right now."""
    nc = await nats.connect(url)
    try:
        return await lease_store.on_server(nc.jetstream()).shard_holders(SHARDS)
    finally:
        await nc.close()


async def tick_until(client: Client, job: str, until: datetime) -> None:
    async def reached() -> bool:
        runs = await records(client, job)
        return bool(runs) and at(runs[-1]["scheduled_at"]) >= until

    await wait_for(reached, (until - datetime.now(until.tzinfo)).total_seconds() + 10,
                   what=f"{job} occurrences up to {until}")


async def stop_and_settle(client: Client, job: str) -> list[dict[str, Any]]:
    """Pause the job, then wait until every recorded occurrence has ended; return the records."""
    await client.call("jobs.pause", {"name": job})

    async def settled() -> list[dict[str, Any]] | None:
        runs = await records(client, job)
        return runs if runs and all(r["state"] in ("succeeded", "failed", "dead", "skipped") for r in runs) else None

    result: list[dict[str, Any]] = await wait_for(settled, 20, what=f"every {job} run to end")
    return result


def assert_one_run_per_occurrence(job: str, runs: list[dict[str, Any]], created: datetime) -> None:
    nominals = [at(r["scheduled_at"]) for r in runs]
    # Exactly one record per nominal time, named by it (the KV-create fire gate)...
    assert len(set(nominals)) == len(runs)
    assert [r["run_id"] for r in runs] == [run_id(job, n) for n in nominals]
    # ...and no gaps: consecutive nominals are one interval apart, starting from the job's creation.
    assert [b - a for a, b in pairwise(nominals)] == [SECOND] * (len(runs) - 1)
    assert timedelta(0) <= nominals[0] - created <= SECOND
    # Every occurrence ran once, as its first attempt.
    assert {(r["state"], r["attempt"]) for r in runs} == {("succeeded", 1)}


async def test_two_trigger_replicas_record_each_occurrence_once(services: Services, client: Client) -> None:
    # Given two trigger replicas that share the shards between them
    await services.start_system(agents=2, triggers=2)
    holders = await wait_for(lambda: _both(services.server.url), 15, what="both replicas to hold shards")
    assert set(holders.values()) == {"trigger-1", "trigger-2"}

    # When an every-second job runs for about six seconds
    job = await client.call("jobs.create", {"spec": {"name": "tick", "command": ["true"],
                                                     "schedule": {"kind": "every", "every_seconds": 1}}})
    created = at(job["created_at"])
    await tick_until(client, "tick", created + 6 * SECOND)

    # Then each nominal occurrence from the first to the last has exactly one run, and it succeeded
    runs = await stop_and_settle(client, "tick")
    assert len(runs) >= 7
    assert_one_run_per_occurrence("tick", runs, created)


async def test_killing_the_shard_owner_loses_and_duplicates_no_occurrence(services: Services, client: Client) -> None:
    # Given an every-second job running under two trigger replicas
    await services.start_system(agents=2, triggers=2)
    job = await client.call("jobs.create", {"spec": {"name": "tick", "command": ["true"],
                                                     "schedule": {"kind": "every", "every_seconds": 1}}})
    created = at(job["created_at"])
    await tick_until(client, "tick", created + 3 * SECOND)

    # When the replica holding the job's shard is killed with SIGKILL
    holders = await shard_holders(services.server.url)
    owner = holders[shard_of("tick", SHARDS)]
    survivor = "trigger-2" if owner == "trigger-1" else "trigger-1"
    gaps_before = await _gaps(services, survivor)
    services[owner].kill9()
    killed_at = datetime.now(created.tzinfo)

    # Then the other replica takes the shard over, and the run record stays gapless and duplicate-free
    await tick_until(client, "tick", killed_at + 5 * SECOND)
    runs = await stop_and_settle(client, "tick")
    assert_one_run_per_occurrence("tick", runs, created)
    assert (await shard_holders(services.server.url))[shard_of("tick", SHARDS)] == survivor
    # And the survivor measured each shard it took from the dead one's last fire pass, which only its membership
    # lease still showed: the lease TTL (2 s), a balance to see it lapse and one to take the shard (TTL/3 each),
    # and a stamp up to a renewal and an idle pass (1 s) old: a few seconds, never 7
    count, total = (a - b for a, b in zip(await _gaps(services, survivor), gaps_before, strict=True))
    assert count == sum(1 for holder in holders.values() if holder == owner)
    assert 1.0 <= total / count <= 7.0


async def _gaps(services: Services, replica: str) -> tuple[float, float]:
    """The count and sum of a trigger replica's trigger_shard takeover gaps (jetcron.core.lifecycle.takeover)."""
    nc = await nats.connect(services.server.url)
    try:
        mine = [i for i in await (await Registry.open(nc.jetstream())).instances() if i.pid == services[replica].pid]
    finally:
        await nc.close()
    assert mine, f"{replica} is not registered"
    found = await samples(mine[0])
    kind = frozenset({("kind", "trigger_shard")})
    return found[("jetcron_takeover_gap_seconds_count", kind)], found[("jetcron_takeover_gap_seconds_sum", kind)]


async def _both(url: str) -> dict[int, str] | None:
    held = await shard_holders(url)
    return held if len(set(held.values())) == 2 else None


async def test_the_shard_count_is_fixed_by_the_first_replica_and_a_replica_that_disagrees_refuses_to_start(
        services: Services) -> None:
    # Given a cluster whose first trigger replica was started with 4 shards (not the default)
    services.start("trigger-1", "trigger", JETCRON_AGENT_ID="trigger-1", JETCRON_TRIGGER_SHARDS="4")
    await services["trigger-1"].wait_logged("trigger ready", 30)

    # When a second replica comes up with the default 16
    second = services.start("trigger-2", "trigger", JETCRON_AGENT_ID="trigger-2")

    # Then it refuses to start, saying what the cluster uses and how to fix it
    assert await asyncio.to_thread(second.wait_exit, 30) == 2
    refused = " ".join(second.output().split())
    assert "jetcron trigger: refusing to start: JETCRON_TRIGGER_SHARDS is 16, but this cluster was created with 4 " \
           "shards (set by trigger-1 at " in refused
    assert "start every trigger replica with JETCRON_TRIGGER_SHARDS=4" in refused
    # And the first replica holds all 4 shards, which `jetcron status` reports as 4 of 4
    await wait_for(lambda: _held_by(services.server.url, 4, "trigger-1"), 15, what="trigger-1 to hold 4 shards")
    status = json.loads(run_cli(services.server.url, "status", "-o", "json").stdout)
    assert (status["trigger_shards"], len(status["shard_holders"])) == (4, 4)
    # And a replica started with the cluster's count joins
    services.start("trigger-3", "trigger", JETCRON_AGENT_ID="trigger-3", JETCRON_TRIGGER_SHARDS="4")
    await services["trigger-3"].wait_logged("trigger ready", 30)


async def _held_by(url: str, shards: int, holder: str) -> bool:
    nc = await nats.connect(url)
    try:
        return set((await lease_store.on_server(nc.jetstream()).shard_holders(shards)).values()) == {holder}
    finally:
        await nc.close()


async def test_a_trigger_restarted_after_recording_an_occurrence_fires_it_into_the_gate_once(
        services: Services, client: Client) -> None:
    # Given a trigger that dies (like kill -9) right after recording and dispatching an occurrence
    await services.start_system(agents=1, core=("api", "placement", "run_tracker"))
    dying = services.start("trigger-1", "trigger", JETCRON_AGENT_ID="trigger-1",
                           JETCRON_FAULT="trigger.after_publish=exit")
    await dying.wait_logged("trigger ready", 30)
    await client.call("jobs.create", {"spec": {"name": "once", "command": ["true"], "schedule": {"kind": "now"}}})
    assert await asyncio.to_thread(dying.wait_exit, 20) == 137

    # When it starts again and plans the same occurrence
    del services.procs["trigger-1"]
    again = services.start("trigger-1", "trigger", JETCRON_AGENT_ID="trigger-1")
    await again.wait_logged("trigger ready", 30)

    # Then the occurrence has one run, which succeeds once...
    async def succeeded() -> list[dict[str, Any]] | None:
        runs = await records(client, "once")
        return runs if runs and runs[0]["state"] == "succeeded" else None

    runs = await wait_for(succeeded, 30, what="the run to succeed")
    assert [(r["attempt"], r["state"]) for r in runs] == [(1, "succeeded")]

    # ...and the second firing was stopped by the KV-create gate, and counted
    async def gate_count() -> float | None:
        nc = await nats.connect(services.server.url)
        try:
            mine = [i for i in await (await Registry.open(nc.jetstream())).instances() if i.pid == again.pid]
        finally:
            await nc.close()
        if not mine:
            return None
        return (await samples(mine[0])).get(("jetcron_fire_gate_duplicates_total", frozenset()))

    assert await wait_for(gate_count, 15, what="the restarted trigger's metrics") == 1.0

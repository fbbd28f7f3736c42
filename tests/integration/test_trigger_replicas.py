"""Two trigger replicas: every nominal occurrence of an interval job gets exactly one run, also across a failover."""

from __future__ import annotations

from datetime import datetime, timedelta
from itertools import pairwise
from typing import Any

import nats
from harness import Services, wait_for

from jetcron.bus.lease import Leases
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
        return await Leases(nc.jetstream()).shard_holders(SHARDS)
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
    owner = (await shard_holders(services.server.url))[shard_of("tick", SHARDS)]
    services[owner].kill9()
    killed_at = datetime.now(created.tzinfo)

    # Then the other replica takes the shard over, and the run record stays gapless and duplicate-free
    await tick_until(client, "tick", killed_at + 5 * SECOND)
    runs = await stop_and_settle(client, "tick")
    assert_one_run_per_occurrence("tick", runs, created)
    survivor = "trigger-2" if owner == "trigger-1" else "trigger-1"
    assert (await shard_holders(services.server.url))[shard_of("tick", SHARDS)] == survivor


async def _both(url: str) -> dict[int, str] | None:
    held = await shard_holders(url)
    return held if len(set(held.values())) == 2 else None

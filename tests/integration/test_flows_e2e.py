"""A flow through the services: a cycle is refused through the API naming it; an upstream that fails for good
blocks its downstream run, which is recorded, put on the events stream and counted."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from harness import Services, wait_for
from metrics_support import samples

from jetcron.bus.registry import Registry
from jetcron.sdk.client import ApiError, Client


async def test_a_cycle_is_refused_through_the_api_naming_it(services: Services, client: Client) -> None:
    await services.start_system(agents=0, core=("api",))
    await client.call("jobs.create", {"spec": {"name": "a", "command": ["true"], "schedule": {
        "kind": "cron", "cron": "0 3 * * *"}}})
    await client.call("jobs.create", {"spec": {"name": "b", "command": ["true"], "depends_on": ["a"]}})
    with pytest.raises(ApiError) as caught:
        await client.call("jobs.update", {"spec": {"name": "a", "command": ["true"], "depends_on": ["b"],
                                                   "schedule": {"kind": "cron", "cron": "0 3 * * *"}}})
    assert caught.value.code == "invalid" and "dependency cycle: a -> b -> a" in str(caught.value)
    assert (await client.call("jobs.get", {"name": "a"}))["job"]["spec"]["depends_on"] == []  # nothing stored


async def test_a_dead_upstream_blocks_its_downstream_with_an_event_and_a_metric(
        services: Services, client: Client) -> None:
    await services.start_system(agents=1)
    # Given up, which fails for good in two seconds, and down, which depends on it
    at = (datetime.now(UTC) + timedelta(seconds=2)).isoformat()
    await client.call("jobs.create", {"spec": {"name": "up", "command": ["false"], "retry": {"max_attempts": 1},
                                               "schedule": {"kind": "at", "at": at}}})
    await client.call("jobs.create", {"spec": {"name": "down", "command": ["true"], "depends_on": ["up"]}})

    # Then down's run in that flow is recorded blocked, naming the upstream run and how it ended
    async def blocked() -> dict[str, object] | None:
        items = (await client.call("runs.list", {"job": "down"}))["items"]
        return items[0] if items and items[0]["state"] == "blocked" else None

    run = await wait_for(blocked, 30, what="down's run to be blocked")
    (up,) = (await client.call("runs.list", {"job": "up"}))["items"]
    assert run["reason"] == f"upstream up run {up['run_id']} ended dead" and up["state"] == "dead"
    assert run["run_id"].split(".", 1)[1] == up["run_id"].split(".", 1)[1]  # the same flow's occurrence
    # and the block is on the events stream
    event = await client.nc.jetstream().get_last_msg("JC_EVENTS", "jc.event.blocked.tracker")
    assert json.loads(event.data)["run_id"] == run["run_id"]
    # and counted by the tracker
    registry = await Registry.open(client.nc.jetstream())
    tracker = next(i for i in await registry.instances() if i.service == "run_tracker")
    counted = await samples(tracker)
    assert counted[("jetcron_runs_finished_total", frozenset({("outcome", "blocked")}))] == 1.0

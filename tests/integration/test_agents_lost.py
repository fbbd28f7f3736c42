"""An agent killed with SIGKILL is counted lost once by the run tracker's leader (it cannot count itself); one that
stops cleanly is not (jetcron_services.run_tracker.agents, jetcron.core.lifecycle.departures)."""

from __future__ import annotations

import asyncio

import nats
from harness import Services, wait_for
from metrics_support import samples

from jetcron.bus.registry import Registry

ENTRY_SECONDS = 4.0
"""The agents bucket's max_age for this test (JETCRON_AGENT_ENTRY_SECONDS, 30 s by default): an entry ages out
that long after its agent's last heartbeat (every 0.5 s here)."""


async def tracker_metrics(services: Services) -> dict[str, float]:
    nc = await nats.connect(services.server.url)
    try:
        tracker = [i for i in await (await Registry.open(nc.jetstream())).instances() if i.service == "run_tracker"]
    finally:
        await nc.close()
    assert len(tracker) == 1
    found = await samples(tracker[0])
    return {name: value for (name, labels), value in found.items()
            if name in ("jetcron_agents_lost_total", "jetcron_agents_alive") and not labels}


async def test_a_killed_agent_is_counted_lost_once_and_a_stopped_one_never(services: Services) -> None:
    # Given three agents heartbeating, seen alive by the tracker's leader
    await services.start_system(agents=3, JETCRON_AGENT_ENTRY_SECONDS=str(ENTRY_SECONDS))

    async def alive(n: float) -> dict[str, float] | None:
        found = await tracker_metrics(services)
        return found if found.get("jetcron_agents_alive") == n else None

    seen = await wait_for(lambda: alive(3), 15, what="the tracker to see three agents alive")
    assert seen["jetcron_agents_lost_total"] == 0

    # When one is killed with SIGKILL and another stops cleanly (it drains and deletes its entry)
    services["agent-1"].kill9()
    services["agent-2"].stop()

    # Then, once the killed one's entry has aged out, it is counted lost, once; the stopped one is not
    found = await wait_for(lambda: alive(1), ENTRY_SECONDS + 15, what="the tracker to see one agent alive")
    assert found["jetcron_agents_lost_total"] == 1
    await asyncio.sleep(ENTRY_SECONDS + 2)  # more than another entry age: nothing is counted twice
    assert (await tracker_metrics(services))["jetcron_agents_lost_total"] == 1
    said = [line for line in services["run_tracker"].output().splitlines() if "agent lost" in line]
    assert len(said) == 1 and "agent-1" in said[0], said

"""Placement leader killed with SIGKILL while runs wait: the standby places each run once, over-commits nothing."""

from __future__ import annotations

import time
from pathlib import Path

import nats
from harness import FAST_SETTINGS, Services, wait_for
from metrics_support import samples
from placement_support import agents_known, job, one_run, runs_of, start

from jetcron.bus import lease as lease_store
from jetcron.bus.registry import Registry
from jetcron.sdk.client import Client
from jetcron.wire import subjects as s

# Each run appends its start and end (as epoch seconds) and its cpu, so overlaps can be summed afterwards.
TIMED = ('echo "$JETCRON_RUN_ID start $(date +%s.%N) {cpu}" >> {out}; sleep {secs}; '
         'echo "$JETCRON_RUN_ID end $(date +%s.%N) {cpu}" >> {out}')


def peak_cpu(path: Path) -> float:
    """The most cpu the recorded runs ever held at once."""
    events = []
    for line in path.read_text().splitlines():
        _, kind, at, cpu = line.split()
        events.append((float(at), 0 if kind == "end" else 1, float(cpu) * (1 if kind == "start" else -1)))
    peak = used = 0.0
    for _, _, delta in sorted(events):
        used += delta
        peak = max(peak, used)
    return peak


async def test_leader_killed_while_runs_wait_every_run_is_placed_once_without_over_commit(
        services: Services, client: Client, tmp_path: Path) -> None:
    out = tmp_path / "times.txt"
    # Given a leader and a standby, and one agent with 2 cpu held entirely by a running job
    await start(services, {"agent-1": {"JETCRON_AGENT_CPU": "2"}}, placements=2)
    await agents_known(services.server.url, 1)
    await client.call("jobs.create", job("hog", "sh", "-c", TIMED.format(out=out, secs=6, cpu=2),
                                         resources={"cpu": 2}))
    await wait_for(lambda: out.exists() and "hog" in out.read_text(), 20, what="the hog to start")
    # And six 1-cpu runs waiting for room
    small = [f"small-{i}" for i in range(6)]
    for name in small:
        await client.call("jobs.create", job(name, "sh", "-c", TIMED.format(out=out, secs=0.5, cpu=1),
                                             resources={"cpu": 1}))

    async def all_waiting() -> bool:
        runs = [r for name in small for r in await runs_of(client, name)]
        return len(runs) == 6 and all(r["state"] == "scheduled" and r["reason"].startswith("no agent with")
                                      for r in runs)

    await wait_for(all_waiting, 20, what="the six runs to wait for room")

    # When the leader is killed with SIGKILL
    services["placement-1"].kill9()

    # Then the standby leads, and every run ends succeeded, on its first attempt, having started once
    await services["placement-2"].wait_logged("placement leader", 20)

    async def all_done() -> list[dict[str, object]] | None:
        runs = [r for name in ["hog", *small] for r in await runs_of(client, name)]
        return runs if len(runs) == 7 and all(r["state"] == "succeeded" for r in runs) else None

    runs = await wait_for(all_done, 40, what="every run to succeed")
    assert all(r["attempt"] == 1 and len(r["history"]) == 1 for r in runs)  # type: ignore[arg-type]
    starts = [line.split()[0] for line in out.read_text().splitlines() if " start " in line]
    assert sorted(starts) == sorted(str(r["run_id"]) for r in runs)
    # And the new leader counted the hog it had not placed: never more than 2 cpu at once on the agent
    assert peak_cpu(out) <= 2
    assert "running=1" in services["placement-2"].output() or '"running": 1' in services["placement-2"].output()


async def test_a_leader_that_loses_its_lease_leads_again_and_keeps_placing(services: Services, client: Client) -> None:
    # Given a lone placement leader that has placed a run
    await start(services, {"agent-1": {}})
    await agents_known(services.server.url, 1)
    await client.call("jobs.create", job("before", "true"))
    await one_run(client, "before", lambda r: r["state"] == "succeeded", what="the first run to succeed")

    # When its lease is taken from it (as when a renewal could not land in time and the lease lapsed)
    async with await nats.connect(services.server.url) as nc:
        await lease_store.on_server(nc.jetstream()).revoke(s.PLACEMENT_LEADER_KEY, "test: taken away", 30)
    await services["placement-1"].wait_logged("placement leadership lost", 20)

    # Then, nobody else contending, it leads again and places what comes next
    await wait_for(lambda: services["placement-1"].output().count('"placement leader"') >= 2, 20,
                   what="placement to lead again")
    await client.call("jobs.create", job("after", "true"))
    await one_run(client, "after", lambda r: r["state"] == "succeeded", what="the run after the loss to succeed")


async def test_a_killed_leaders_takeover_gap_is_about_the_outage(services: Services, client: Client) -> None:
    # Given a leader that has placed a run (so it has acted, and its lease carries when), and a standby
    await start(services, {"agent-1": {}}, placements=2)
    await agents_known(services.server.url, 1)
    await client.call("jobs.create", job("before", "true"))
    await one_run(client, "before", lambda r: r["state"] == "succeeded", what="the first run to succeed")
    # (its lease carries its last pass from its next renewal, a third of the TTL on: a run handed over by its record
    # alone can succeed before that, and a leader killed then leaves no stamp to measure a gap from)
    nc = await nats.connect(services.server.url)
    try:
        leases = lease_store.on_server(nc.jetstream())

        async def stamped() -> bool:
            held = await leases.read(s.PLACEMENT_LEADER_KEY)
            return held is not None and held.value.acted_at is not None

        await wait_for(stamped, 10, what="the leader's lease to carry its last pass")
    finally:
        await nc.close()

    # When the leader is killed with SIGKILL, and the standby leads
    killed = time.monotonic()
    services["placement-1"].kill9()
    await services["placement-2"].wait_logged("placement leader", 20)
    outage = time.monotonic() - killed

    # Then the new leader reports one gap, from the dead leader's last pass to its own first: the outage, give or
    # take the test's polling (0.1 s) and how old the dead leader's stamp was (one renewal, TTL/3, and one pass)
    async def gap() -> tuple[float, float] | None:
        nc = await nats.connect(services.server.url)
        try:
            mine = [i for i in await (await Registry.open(nc.jetstream())).instances()
                    if i.pid == services["placement-2"].pid]
        finally:
            await nc.close()
        if not mine:
            return None
        found = await samples(mine[0])
        kind = frozenset({("kind", "placement_leader")})
        count = found.get(("jetcron_takeover_gap_seconds_count", kind), 0.0)
        return (count, found[("jetcron_takeover_gap_seconds_sum", kind)]) if count else None

    count, seconds = await wait_for(gap, 15, what="the new leader's takeover gap")
    ttl = float(FAST_SETTINGS["JETCRON_LEADER_LEASE_TTL"])
    assert count == 1
    assert outage - 0.5 <= seconds <= outage + ttl / 3 + 1.5, (seconds, outage)

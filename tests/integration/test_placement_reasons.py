"""Waiting runs say why, in `jetcron runs list`: unsatisfiable at submit, quota, upstream jobs."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import nats
from harness import Services
from placement_support import agents_known, cli, job, one_run, start

from jetcron.sdk.client import Client
from jetcron.wire import subjects as s

SMALL = {"JETCRON_AGENT_CPU": "2", "JETCRON_AGENT_MEMORY_MB": "4096"}


async def test_a_job_no_agent_could_ever_run_is_warned_at_submit_and_waits_without_looping(
        services: Services, client: Client) -> None:
    # Given one agent with 2 cpu, known to placement
    await start(services, {"agent-1": SMALL})
    await agents_known(services.server.url, 1)

    # When a job asking for 64 cpu is created
    record = await client.call("jobs.create", job("huge", "true", resources={"cpu": 64}))

    # Then the reply warns, naming the largest agent
    never = "no registered agent can ever fit 64 cpu (largest: agent-1 with 2 cpu)"
    assert record["warnings"] == [f"unsatisfiable: {never}; its runs will wait until such an agent registers"]
    # And its run waits with that reason, visible in `jetcron runs list`
    run = await one_run(client, "huge", lambda r: r["reason"] == never, what="the run to wait with the reason")
    assert run["state"] == "scheduled"
    assert never in cli(services.server.url, "runs", "list", "--job", "huge")

    # And it is held from its record, not redelivered in a loop: no PlaceRun redelivered (the record is the
    # hand-off; a re-drive, 30 s past due and at doubling ages after, is held with it or acked), the record
    # written once
    nc = await nats.connect(services.server.url)
    try:
        js = nc.jetstream()
        kv = await js.key_value(s.BUCKET_RUNS)
        revision = (await kv.get(run["run_id"])).revision
        await asyncio.sleep(3)
        info = await js.consumer_info(s.STREAM_PLACE, s.CONSUMER_PLACEMENT)
        assert info.num_redelivered == 0 and info.num_ack_pending <= 1
        assert (await kv.get(run["run_id"])).revision == revision
    finally:
        await nc.close()

    # And a job that fits gets no warning
    assert (await client.call("jobs.create", job("fine", "true", resources={"cpu": 1})))["warnings"] == []


async def test_a_run_over_its_tenants_quota_waits_saying_so(services: Services, client: Client) -> None:
    # Given tenant a may use 1 cpu at a time, and room for more; its first run holds the cpu until the test lets it
    # end (a fixed sleep of 12 s ended before the CLI, slow to start under a loaded run, had listed the second)
    gate = Path(f"/tmp/jetcron-gate-{uuid.uuid4().hex}")
    await start(services, {"agent-1": {"JETCRON_AGENT_CPU": "4"}})
    await client.call("tenants.set", {"tenant": "a", "max_cpu": 1})
    await client.call("jobs.create", job("first", "sh", "-c", f"while [ ! -e {gate} ]; do sleep 0.1; done",
                                         tenant="a", resources={"cpu": 1}))
    # (the admin names another tenant's jobs by their key, tenant.name)
    await one_run(client, "a.first", lambda r: r["state"] == "running", timeout=30, what="the first run to run")

    # When a second run of the tenant comes
    await client.call("jobs.create", job("second", "true", tenant="a", resources={"cpu": 1}))

    # Then it waits on the quota, and says so
    why = "quota: tenant a at 1/1 cpu (this run needs 1)"
    await one_run(client, "a.second", lambda r: r["state"] == "scheduled" and r["reason"] == why,
                  what="the second run to wait on the quota")
    assert why in cli(services.server.url, "runs", "list", "--job", "a.second")
    # And it runs once the first has finished
    gate.touch()
    try:
        await one_run(client, "a.second", lambda r: r["state"] == "succeeded", timeout=30,
                      what="the second run to run")
    finally:
        gate.unlink()


async def test_runs_go_to_agents_with_a_free_slot_and_wait_for_one_saying_so(
        services: Services, client: Client) -> None:
    # Given two roomy agents that each hold one attempt at a time (JETCRON_AGENT_SLOTS=1)
    one = {"JETCRON_AGENT_CPU": "8", "JETCRON_AGENT_SLOTS": "1"}
    await start(services, {"agent-1": one, "agent-2": one})
    await agents_known(services.server.url, 2)

    # When three long runs come (packing alone would put all three on one agent)
    for name in ("long-1", "long-2"):
        await client.call("jobs.create", job(name, "sleep", "12", resources={"cpu": 1}))
        await one_run(client, name, lambda r: r["state"] == "running", timeout=30, what=f"{name} to run")
    for name in ("third", "fourth"):
        await client.call("jobs.create", job(name, "true", resources={"cpu": 1}))

    # Then the first two run on different agents, and the others wait for a slot, each saying so
    agents = {(await one_run(client, n, lambda r: True, what=n))["agent"] for n in ("long-1", "long-2")}
    assert agents == {"agent-1", "agent-2"}
    why = "no agent with a free slot (2 agents run as many attempts as their slots allow)"
    for name in ("third", "fourth"):
        await one_run(client, name, lambda r: r["state"] == "scheduled" and r["reason"] == why,
                      what=f"{name} to wait for a slot")
    # And they run once slots are free
    for name in ("third", "fourth"):
        await one_run(client, name, lambda r: r["state"] == "succeeded", timeout=40, what=f"{name} to run")


async def test_a_downstream_run_waits_on_its_upstream_jobs_and_says_which(services: Services, client: Client) -> None:
    # Given a diamond: root -> (slow, quick) -> join, where slow runs until the test lets it end (a fixed sleep let
    # it end before the CLI, slow to start under a loaded run, had listed join as waiting)
    gate = Path(f"/tmp/jetcron-gate-{uuid.uuid4().hex}")
    await start(services, {"agent-1": {"JETCRON_AGENT_CPU": "8"}})
    await client.call("jobs.create", job("root", "sleep", "1.5"))
    slow = ["sh", "-c", f"while [ ! -e {gate} ]; do sleep 0.1; done"]
    for name, command in (("slow", slow), ("quick", ["true"])):
        await client.call("jobs.create", {"spec": {"name": name, "command": command, "depends_on": ["root"]}})
    await client.call("jobs.create", {"spec": {"name": "join", "command": ["true"], "depends_on": ["slow", "quick"]}})

    # When quick has succeeded and slow still runs
    # Then join's run is recorded waiting, naming the upstream it waits on
    waiting = await one_run(client, "join", lambda r: r["state"] == "waiting", timeout=30,
                            what="join to wait on its upstream")
    assert waiting["reason"].startswith("waiting on upstream jobs: slow (")
    table = cli(services.server.url, "runs", "list", "--job", "join")
    assert "waiting on upstream jobs: slow" in table, table
    # And once slow succeeds it runs, in the same flow
    gate.touch()
    done = await one_run(client, "join", lambda r: r["state"] == "succeeded", timeout=30, what="join to run")
    gate.unlink()
    root = (await client.call("runs.list", {"job": "root"}))["items"][0]
    assert done["run_id"].split(".", 1)[1] == root["run_id"].split(".", 1)[1]



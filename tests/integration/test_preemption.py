"""Preemption by priority on a real server with fake GPUs (docs/preemption.md): a low gang holding every GPU gives its
place to a high run, saves a checkpoint in its grace, and finishes later from it as its next attempt, its retry
budget untouched; the guards hold (minimum runtime, maximum preemptions, a tenant without the policy), and so do
quotas."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import nats
from harness import Services
from placement_support import agents_known, cli, job, one_run, start

from jetcron.sdk.client import Client
from jetcron.wire import subjects as s
from jetcron.wire.codec import decode
from jetcron.wire.messages import RunPreempted


def gpu_agent(gpus: int = 8) -> dict[str, str]:
    # TEST ONLY: the agent advertises GPUs it does not have.
    return {"JETCRON_AGENT_FAKE_GPUS": f"{gpus}:H100", "JETCRON_AGENT_LABELS": "leaf=l1", "JETCRON_AGENT_CPU": "8"}


# Every rank logs "<attempt> <rank> <agent> <what>"; rank 0 loads the run's checkpoint and counts steps. On SIGTERM
# every rank takes a second (a checkpoint that takes a while to write), rank 0 saves the steps done, and they exit.
# The first attempt would count for ever; a later one goes on from the step after the saved one for three more.
GANG = '''
import os, signal, sys, time
from jetcron import checkpoint
path = sys.argv[1]
rank, attempt = int(os.environ["JETCRON_GANG_RANK"]), int(os.environ["JETCRON_ATTEMPT"])
agent = os.environ["JETCRON_AGENT_ID"]
def say(text):
    with open(path, "a") as f:
        f.write(f"{attempt} {rank} {agent} {text}\\n")
with checkpoint.open() as ckpt:
    last = ckpt.load() if rank == 0 else None
    step = last.step + 1 if last is not None else 0
    say(f"starts {step}")
    def stop(*_):
        time.sleep(1.0)
        if rank == 0:
            ckpt.save(step, {"why": "preempted"})
            say(f"saved {step}")
        say(f"exits {time.time()}")
        sys.exit(0)
    signal.signal(signal.SIGTERM, stop)
    end = step + 3 if attempt > 1 else 10**9
    while step < end:
        time.sleep(0.2)
        step += 1
        if rank == 0:
            say(f"step {step}")
    say("done")
'''

# Holds its GPUs until stopped; exits 0 on SIGTERM.
HOLD = ["sh", "-c", 'trap "exit 0" TERM; while true; do sleep 0.2; done']


def lines(path: Path) -> list[list[str]]:
    return [line.split() for line in path.read_text().splitlines()] if path.exists() else []


async def last_preempted(url: str) -> RunPreempted:
    nc = await nats.connect(url)
    try:
        msg = await nc.jetstream().get_last_msg(s.STREAM_EVENTS, s.event_subject("preempted", s.PLACEMENT_SOURCE))
        return decode(msg.data or b"", RunPreempted)
    finally:
        await nc.close()


async def test_a_low_gang_gives_its_gpus_to_a_high_run_and_finishes_later_from_its_own_checkpoint(
        services: Services, client: Client, tmp_path: Path) -> None:
    # Given two 8-GPU hosts under one leaf, and tenant batch's runs preemptible (set with the CLI)
    url = services.server.url
    await start(services, {"agent-1": gpu_agent(), "agent-2": gpu_agent()})
    await agents_known(url, 2)
    out = cli(url, "tenants", "set", "batch", "--preemption", "max=2,min-runtime=1,grace=5s")
    assert "max=2,min-runtime=1,grace=5" in out, out

    # And a low gang of batch holding every GPU, one attempt in its budget, well into its work
    script, log = tmp_path / "gang.py", tmp_path / "gang.log"
    script.write_text(GANG)
    await client.call("jobs.create", job("gang", sys.executable, str(script), str(log), tenant="batch",
                                         priority="low", retry={"max_attempts": 1},
                                         resources={"cpu": 1, "memory_mb": 256, "gpus": 8, "hosts": 2}))
    gang = await one_run(client, "batch.gang", lambda r: r["state"] == "running" and any(
        line[3:] == ["step", "8"] for line in lines(log)), timeout=40, what="the gang to be well into its work")

    # When a high run of another tenant needs 8 GPUs
    high_out = tmp_path / "high.txt"
    await client.call("jobs.create", job("high", "sh", "-c", f'echo "$JETCRON_AGENT_ID $CUDA_VISIBLE_DEVICES '
                                                             f'$(date +%s.%N)" >> {high_out}; sleep 1',
                                         tenant="urgent", priority="high", resources={"cpu": 1, "gpus": 8}))

    # Then it is assigned the place the gang leaves, saying so while the gang saves its checkpoint
    high = await one_run(client, "urgent.high", lambda r: r["state"] == "assigned" and r["reason"], timeout=20,
                         what="the high run to be assigned, preempting")
    [agent] = high["agents"]
    assert high["reason"] == f"preempting run {gang['run_id']} (low) to free 8 GPUs on {agent}"
    assert agent in gang["agents"]

    # And it runs, on the gang's devices there, once the gang's process on that host has ended
    high = await one_run(client, "urgent.high", lambda r: r["state"] == "succeeded", timeout=30,
                         what="the high run to succeed")
    [(ran_on, devices, started)] = [line for line in lines(high_out)]
    assert (ran_on, devices) == (agent, "0,1,2,3,4,5,6,7")
    exits = {line[2]: float(line[4]) for line in lines(log) if line[0] == "1" and line[3] == "exits"}
    assert set(exits) == set(gang["agents"]), lines(log)
    assert float(started) > exits[agent], "the high run started while the preempted one still held the GPUs"

    # And the gang, queued again at its own priority, finishes from the step it saved, as its second attempt
    done = await one_run(client, "batch.gang", lambda r: r["state"] in ("succeeded", "failed", "dead"), timeout=60,
                         what="the gang to finish")
    assert (done["state"], done["attempt"], done["preemptions"]) == ("succeeded", 2, 1), done
    [saved] = [int(line[4]) for line in lines(log) if line[:2] == ["1", "0"] and line[3] == "saved"]
    assert saved >= 8
    assert [line[4] for line in lines(log) if line[:2] == ["2", "0"] and line[3] == "starts"] == [str(saved + 1)]
    assert [line[3:] for line in lines(log) if line[:2] == ["2", "0"]][-1] == ["done"]
    first = done["history"][0]
    assert (first["attempt"], first["outcome"]) == (1, "preempted")
    assert first["reason"] == f"preempted by run {high['run_id']} (high) to free 8 GPUs on {agent}"
    # And its retry budget is untouched: one attempt allowed, preempted once, and still it succeeded
    assert done["spec"]["retry"]["max_attempts"] == 1

    # And the audit trail names the preemption and who caused it
    event = await last_preempted(url)
    assert (event.run_id, event.attempt, event.by_run, event.by_tenant, event.freed, event.grace_seconds) == (
        gang["run_id"], 1, high["run_id"], "urgent", f"8 GPUs on {agent}", 5.0)


async def test_the_guards_hold_a_run_under_its_minimum_runtime_and_one_preempted_its_maximum(
        services: Services, client: Client) -> None:
    # Given one 8-GPU host held by a low run of batch, whose policy protects it for an hour
    url = services.server.url
    await start(services, {"agent-1": gpu_agent()})
    await agents_known(url, 1)
    await cli_set(url, "batch", "max=1,min-runtime=1h,grace=2s")
    await client.call("jobs.create", job("low", *HOLD, tenant="batch", priority="low", resources={"gpus": 8}))
    low = await one_run(client, "batch.low", lambda r: r["state"] == "running", timeout=30)

    # When a high run needs its GPUs
    await client.call("jobs.create", job("h1", "sleep", "1", tenant="urgent", priority="high", resources={"gpus": 8}))

    # Then it waits: the low run has not run its minimum
    await one_run(client, "urgent.h1", lambda r: r["reason"].startswith("no agent with"), timeout=20,
                  what="the high run to wait")
    await asyncio.sleep(2)
    assert (await one_run(client, "batch.low", lambda r: True))["attempt"] == 1

    # And once the minimum is lowered, it is preempted, once: the high run runs, the low one comes back
    await cli_set(url, "batch", "max=1,min-runtime=0,grace=2s")
    await one_run(client, "urgent.h1", lambda r: r["state"] == "succeeded", timeout=30, what="h1 to run")
    low = await one_run(client, "batch.low", lambda r: r["state"] == "running" and r["attempt"] == 2, timeout=30,
                        what="the low run back as attempt 2")
    assert (low["preemptions"], low["history"][0]["outcome"]) == (1, "preempted")

    # And having been preempted as often as its policy allows, it is not preempted again
    await client.call("jobs.create", job("h2", "sleep", "1", tenant="urgent", priority="high", resources={"gpus": 8}))
    await one_run(client, "urgent.h2", lambda r: r["reason"].startswith("no agent with"), timeout=20,
                  what="the second high run to wait")
    await asyncio.sleep(2)
    low = await one_run(client, "batch.low", lambda r: True)
    assert (low["state"], low["attempt"], low["preemptions"]) == ("running", 2, 1)
    await client.runs.cancel(low["run_id"])
    await one_run(client, "urgent.h2", lambda r: r["state"] == "succeeded", timeout=30, what="h2 to run at last")


async def test_a_tenant_without_the_policy_is_never_preempted_and_quotas_still_hold(
        services: Services, client: Client) -> None:
    url = services.server.url
    await start(services, {"agent-1": gpu_agent()})
    await agents_known(url, 1)

    # Given a low run of a tenant without the policy holding every GPU
    await client.call("jobs.create", job("low", *HOLD, tenant="plain", priority="low", resources={"gpus": 8}))
    plain = await one_run(client, "plain.low", lambda r: r["state"] == "running", timeout=30)
    # When a critical run needs them
    await client.call("jobs.create", job("c", "sleep", "1", tenant="urgent", priority="critical",
                                         resources={"gpus": 8}))
    # Then it waits, and the low run runs on
    critical = await one_run(client, "urgent.c", lambda r: r["reason"].startswith("no agent with"), timeout=20)
    await asyncio.sleep(2)
    assert (await one_run(client, "plain.low", lambda r: True))["attempt"] == 1
    await client.runs.cancel(critical["run_id"])
    await client.runs.cancel(plain["run_id"])

    # Given now a preemptible low run holding them, and the high run's tenant allowed 4 GPUs at a time
    await cli_set(url, "batch", "min-runtime=0,grace=2s")
    await client.tenants.set("urgent", max_gpus=4)
    await client.call("jobs.create", job("low", *HOLD, tenant="batch", priority="low", resources={"gpus": 8}))
    await one_run(client, "batch.low", lambda r: r["state"] == "running", timeout=30)
    # When a high run of that tenant needs 8
    await client.call("jobs.create", job("h", "sleep", "1", tenant="urgent", priority="high", resources={"gpus": 8}))
    # Then it waits on its quota, and preempts nothing
    why = "quota: tenant urgent at 0/4 gpus (this run needs 8)"
    await one_run(client, "urgent.h", lambda r: r["reason"] == why, timeout=20, what="the high run to wait on quota")
    await asyncio.sleep(2)
    assert (await one_run(client, "batch.low", lambda r: True))["attempt"] == 1
    # And once its quota allows it, it takes the low run's place
    await client.tenants.set("urgent", max_gpus=8)
    await one_run(client, "urgent.h", lambda r: r["state"] == "succeeded", timeout=30, what="the high run to run")
    low: dict[str, Any] = await one_run(client, "batch.low", lambda r: r["preemptions"] == 1, timeout=10)
    assert low["history"][0]["outcome"] == "preempted"
    await client.runs.cancel(low["run_id"])


async def cli_set(url: str, tenant: str, preemption: str) -> None:
    await asyncio.to_thread(cli, url, "tenants", "set", tenant, "--preemption", preemption)

"""A GPU host that stopped heartbeating comes back suspect: cpu work yes, GPU work only after a health check."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import nats
from harness import Services, wait_for
from placement_support import agents_known, job, one_run, start

from jetcron.sdk.client import Client
from jetcron.wire import subjects as s


async def suspect_keys(url: str) -> list[str]:
    nc = await nats.connect(url)
    try:
        kv = await nc.jetstream().key_value(s.BUCKET_PLACEMENT)
        try:
            return sorted(await kv.keys())
        except Exception:
            return []
    finally:
        await nc.close()


async def test_a_returning_gpu_host_gets_no_gpu_work_until_its_health_check_passes(
        services: Services, client: Client, tmp_path: Path) -> None:
    healthy = tmp_path / "healthy"
    healthy.touch()
    agent_env = {"JETCRON_AGENT_FAKE_GPUS": "2:H100", "JETCRON_AGENT_CPU": "4",  # TEST ONLY: fake GPUs
                 "JETCRON_GPU_HEALTH_CHECK": f"test -f {healthy}", "JETCRON_GPU_HEALTH_EVERY": "0.5"}
    # Given a healthy 2-GPU host
    await start(services, {"agent-1": agent_env})
    await agents_known(services.server.url, 1)

    # When it stops heartbeating (killed), is noticed missing, and comes back with a failing health check
    services["agent-1"].kill9()
    await wait_for(lambda: "missed heartbeats" in services["placement-1"].output(), 15,
                   what="placement to notice the host missing")
    await wait_for(lambda: suspect_keys(services.server.url), 10, what="the suspect mark in KV")
    assert "suspect.agent-1" in await suspect_keys(services.server.url)
    healthy.unlink()
    services.start("agent-1-again", "agent", JETCRON_AGENT_ID="agent-1", **agent_env)
    await services["agent-1-again"].wait_logged("agent ready", 30)

    # Then it takes cpu work but no GPU work, and the GPU run says why
    await client.call("jobs.create", job("cpu", "true", resources={"cpu": 1}))
    await client.call("jobs.create", job("gpu", "sh", "-c", "echo devices=$CUDA_VISIBLE_DEVICES",
                                         resources={"cpu": 1, "gpus": 1}))
    cpu = await one_run(client, "cpu", lambda r: r["state"] == "succeeded", timeout=20)
    assert cpu["agent"] == "agent-1"
    waiting = await one_run(client, "gpu", lambda r: "suspect" in r["reason"], timeout=20,
                            what="the GPU run to wait on the suspect host")
    assert waiting["state"] == "scheduled"
    assert waiting["reason"].endswith("(every matching agent is draining or suspect)")

    # When its health check passes again
    healthy.touch()

    # Then it is cleared and the GPU run lands on it with its device
    done = await one_run(client, "gpu", lambda r: r["state"] == "succeeded", timeout=20, what="the GPU run to run")
    assert (done["agent"], done["gpu_indices"]) == ("agent-1", {"agent-1": [0]})
    logs = await client.call("runs.logs", {"run_id": done["run_id"]})
    assert "devices=0" in logs["output"]
    await wait_for(lambda: _cleared(services.server.url), 10, what="the suspect mark to be removed")


async def _cleared(url: str) -> bool:
    return "suspect.agent-1" not in await suspect_keys(url)


async def test_a_pass_from_before_the_host_went_missing_does_not_clear_it(
        services: Services, client: Client) -> None:
    # Given a GPU host whose health check always passes, but runs only every 12 s
    agent_env = {"JETCRON_AGENT_FAKE_GPUS": "1:H100", "JETCRON_AGENT_CPU": "4",  # TEST ONLY: fake GPUs
                 "JETCRON_GPU_HEALTH_CHECK": "true", "JETCRON_GPU_HEALTH_EVERY": "12"}
    await start(services, {"agent-1": agent_env})
    await agents_known(services.server.url, 1)

    # When its agent is paused long enough to miss heartbeats, then resumes (same process, same last check)
    os.kill(services["agent-1"].pid, signal.SIGSTOP)
    try:
        await wait_for(lambda: "missed heartbeats" in services["placement-1"].output(), 15,
                       what="placement to notice the host missing")
    finally:
        os.kill(services["agent-1"].pid, signal.SIGCONT)

    # Then a GPU run waits: the passing check it advertises ran before it went missing
    await client.call("jobs.create", job("gpu", "true", resources={"cpu": 1, "gpus": 1}))
    waiting = await one_run(client, "gpu", lambda r: "suspect" in r["reason"], timeout=15,
                            what="the GPU run to wait on the suspect host")
    assert waiting["state"] == "scheduled"
    # And once its next check passes, the host is cleared and the run lands on it
    done = await one_run(client, "gpu", lambda r: r["state"] == "succeeded", timeout=25, what="the GPU run to run")
    assert done["agent"] == "agent-1"
    assert "cleared by a passing health check" in services["placement-1"].output()

"""Container runs go only to agents whose docker or podman engine answers, and run through its CLI."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from harness import Services, wait_for
from test_agent_helper_env import store_as_an_older_api_did
from test_agent_host import fake_docker
from test_runs import now_job, state_is, the_run

from jetcron.sdk.client import ApiError, Client


async def test_an_image_run_waits_for_an_agent_with_a_working_runtime_then_runs_through_its_cli(
        services: Services, client: Client, tmp_path: Path) -> None:
    # Given agent-1, whose docker CLI has no engine (as on this machine), so it advertises no container capability
    broken = tmp_path / "broken-bin"
    fake_docker(broken, engine=False)
    path = os.environ.get("PATH", "")
    await services.start_system(agents=0)
    services.start("agent-1", "agent", JETCRON_AGENT_ID="agent-1", PATH=f"{broken}:{path}")
    await services["agent-1"].wait_logged("agent ready", 30)

    async def listed() -> list[dict[str, object]]:
        return list((await client.call("agents.list"))["items"])  # empty until the agent's first heartbeat

    agents = await wait_for(listed, 10, what="agent-1 registered")
    assert [(a["agent_id"], a["capabilities"]) for a in agents] == [("agent-1", [])]

    # When a job asks for an image, and for a secret
    await client.call("jobs.create", now_job(
        "boxed", "sh", "-c", 'echo "in $FAKE_IMAGE as $JETCRON_RUN_ID with $GREETING and ${#API_TOKEN}"',
        image="alpine:3.20", env={"GREETING": "hi"}, secrets=["API_TOKEN"]))

    # Then it waits with the reason, rather than failing on agent-1
    waiting = await the_run(client, "boxed", when=lambda r: "container" in r["reason"], what="a waiting reason")
    assert waiting["state"] == "scheduled"

    # When agent-2 with a working engine joins, the secret kept on its host
    working = tmp_path / "working-bin"
    fake_docker(working, engine=True)
    kept = tmp_path / "agent-secrets" / "default"
    kept.mkdir(parents=True)
    (kept / "API_TOKEN").write_text("s3cr3t-value\n")
    services.start("agent-2", "agent", JETCRON_AGENT_ID="agent-2", PATH=f"{working}:{path}",
                   JETCRON_AGENT_SECRETS_DIR=str(kept.parent))

    # Then the run goes there and runs through `docker run`, with the job's env, its secret (by name only: the
    # value never in an argv) and the run's identity
    run = await the_run(client, "boxed", when=state_is("succeeded", "failed", "dead"), timeout=30,
                        what="the container run to end")
    assert (run["state"], run["agent"]) == ("succeeded", "agent-2")
    output = (await client.call("runs.logs", {"run_id": run["run_id"]}))["output"]
    assert output == f"in alpine:3.20 as {run['run_id']} with hi and 12\n"
    calls = (working / "calls.log").read_text().splitlines()
    docker_run = next(c for c in calls if c.startswith("run "))
    assert f"--name jc-{run['run_id']}-1" in docker_run
    assert "--label jetcron.agent=agent-2" in docker_run and "--memory 64m" in docker_run
    assert "-e GREETING" in docker_run and "hi" not in docker_run.split("alpine:3.20")[0]
    assert "-e API_TOKEN" in docker_run and "s3cr3t" not in "\n".join(calls)
    # No --rm (the docker CLI on podman's socket then exits 0 whatever the container did): removed after it ended
    assert "--rm" not in docker_run.split() and f"rm -f jc-{run['run_id']}-1" in calls[calls.index(docker_run):]
    assert docker_run.endswith(
        "alpine:3.20 sh -c echo \"in $FAKE_IMAGE as $JETCRON_RUN_ID with $GREETING and ${#API_TOKEN}\"")
    listed = {a["agent_id"]: a["capabilities"] for a in (await client.call("agents.list"))["items"]}
    assert listed == {"agent-1": [], "agent-2": ["docker", "container"]}


async def test_an_image_runs_cli_reaches_the_agents_engine_with_the_agents_settings_never_the_jobs(
        services: Services, client: Client, tmp_path: Path) -> None:
    # Given an agent whose docker CLI reaches its engine through a DOCKER_HOST of the agent's own
    working = tmp_path / "bin"
    fake_docker(working, engine=True)
    await services.start_system(agents=0)
    services.start("agent-1", "agent", JETCRON_AGENT_ID="agent-1", JETCRON_AGENT_JOB_USER="nobody",
                   PATH=f"{working}:{os.environ.get('PATH', '')}", DOCKER_HOST="unix:///run/agents-engine.sock")
    await services["agent-1"].wait_logged("agent ready", 30)

    # When a job names another engine, configuration or credential for the CLI, it is refused by name
    for name in ("DOCKER_HOST", "DOCKER_CONFIG", "CONTAINER_HOST", "DOCKER_CONTEXT", "REGISTRY_AUTH_FILE"):
        with pytest.raises(ApiError) as caught:
            await client.call("jobs.create", now_job("steer", "true", env={name: "tcp://10.0.0.1:2375"}))
        assert caught.value.code == "invalid" and str(caught.value).startswith(f"env.{name}: "), caught.value
    # ... and so, in an image job, does what the CLI reads of its own environment (its helpers, its home)
    for name in ("PATH", "HOME", "XDG_CONFIG_HOME"):
        with pytest.raises(ApiError) as caught:
            await client.call("jobs.create", now_job("steer", "true", image="alpine:3.20", env={name: "/tmp/x"}))
        assert str(caught.value).startswith(f"env.{name}: is read by the container CLI"), caught.value

    # Given an image job stored before those names were refused, pointing the CLI at the tenant's own engine,
    # configuration and programs
    planted = tmp_path / "planted"
    planted.mkdir()
    stored = {"LATER_HOST": "tcp://10.0.0.1:2375", "LATER_CONFIG": str(planted),
              "LATER_PATH": f"{planted}:/usr/bin:/bin", "GREETING": "hi"}
    await client.call("jobs.create", {"spec": {"name": "boxed", "command": ["sh", "-c", "echo $GREETING"],
                                               "image": "alpine:3.20", "env": stored,
                                               "schedule": {"kind": "cron", "cron": "0 0 1 1 *"},
                                               "retry": {"max_attempts": 1}}})
    renames = {"LATER_HOST": "DOCKER_HOST", "LATER_CONFIG": "DOCKER_CONFIG", "LATER_PATH": "PATH"}
    await store_as_an_older_api_did(services.server.url, "boxed", renames)

    # When it runs
    run_id = (await client.call("jobs.trigger", {"name": "boxed"}))["run_id"]

    async def ended() -> dict[str, object] | None:
        run: dict[str, object] = await client.call("runs.get", {"run_id": run_id})
        return run if run["state"] in ("succeeded", "failed", "dead") else None

    run = await wait_for(ended, 30, what="the image run to end")

    # Then the CLI ran with the agent's engine and its own PATH, and with none of the job's settings for it
    cli = json.loads((working / "env.log").read_text().splitlines()[-1])["env"]
    assert cli["DOCKER_HOST"] == "unix:///run/agents-engine.sock", cli
    assert "DOCKER_CONFIG" not in cli and str(planted) not in cli["PATH"], cli
    # And the container got the job's own variable, and nothing of those
    docker_run = next(c for c in (working / "calls.log").read_text().splitlines() if c.startswith("run "))
    assert "-e GREETING" in docker_run and "-e DOCKER" not in docker_run and "-e PATH" not in docker_run
    output = (await client.call("runs.logs", {"run_id": run_id}))["output"]
    assert (run["state"], output) == ("succeeded", "hi\n"), (run, output)

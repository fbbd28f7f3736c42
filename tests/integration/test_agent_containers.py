"""Container runs go only to agents whose docker or podman engine answers, and run through its CLI."""

from __future__ import annotations

import os
from pathlib import Path

from harness import Services, wait_for
from test_agent_host import fake_docker
from test_runs import now_job, state_is, the_run

from jetcron.sdk.client import Client


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

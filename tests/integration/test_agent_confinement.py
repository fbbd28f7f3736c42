"""A job's process is confined: a clean environment, an unprivileged user, no way to the agent's credential."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from harness import Services, mint
from test_runs import now_job, state_is, the_run

from jetcron.auth.authority import Authority
from jetcron.auth.roles import Role
from jetcron.sdk.client import Client

ENDED = state_is("succeeded", "failed", "dead")


async def _output(client: Client, job: str, *command: str, **spec: Any) -> tuple[dict[str, Any], str]:
    await client.call("jobs.create", now_job(job, *command, **spec))
    run = await the_run(client, job, when=ENDED, what=f"{job} to end")
    return run, (await client.call("runs.logs", {"run_id": run["run_id"]}))["output"]


async def test_a_job_sees_none_of_the_agents_environment_and_runs_unprivileged(
        services: Services, client: Client, tmp_path: Path) -> None:
    # Given an agent running as root, with settings, a credential and variables of its own in its environment
    creds = mint(Authority.ensure(tmp_path / "auth"), tmp_path / "agent.creds", Role.AGENT, agent_id="agent-1")
    await services.start_system(agents=1, JETCRON_AGENT_JOB_USER="nobody", AGENT_ONLY_MARKER="xyz",
                                JETCRON_NATS_CREDS=creds)
    assert os.getuid() == 0, "these tests run as root, like an agent container does"

    # When a job prints who it is and its whole environment
    run, output = await _output(client, "whoami", "sh", "-c", "id -u; env", env={"GREETING": "hello"})

    # Then it ran as the unprivileged user, with only its own variables and the run's
    assert run["state"] == "succeeded", output
    uid, *lines = output.splitlines()
    assert int(uid) != 0
    env = dict(line.split("=", 1) for line in lines if "=" in line)
    assert env["GREETING"] == "hello" and env["JETCRON_RUN_ID"] == run["run_id"]
    assert env["PATH"] == "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    assert env["LANG"] == "C.UTF-8" and env["HOME"]
    assert "AGENT_ONLY_MARKER" not in env and "xyz" not in output
    assert "JETCRON_NATS_CREDS" not in env and str(creds) not in output
    assert not {name for name in env if name.startswith("JETCRON_")} - {
        "JETCRON_RUN_ID", "JETCRON_ATTEMPT", "JETCRON_IDEMPOTENCY_KEY", "JETCRON_SCHEDULED_AT",
        "JETCRON_FENCING_TOKEN", "JETCRON_JOB", "JETCRON_AGENT_ID", "JETCRON_NATS_URL", "JETCRON_TENANT",
        "JETCRON_SCRATCH"}

    # And it cannot read a file only the agent's user can (as the agent's credential is): in /var/tmp, which its
    # private /tmp does not hide
    secret = Path("/var/tmp") / f"jetcron-agent-only-{os.getpid()}"
    secret.write_text("s3cret")
    secret.chmod(0o600)
    try:
        run, output = await _output(client, "peek", "cat", str(secret))
    finally:
        secret.unlink()
    assert run["state"] in ("failed", "dead") and run["exit_code"] == 1
    assert "Permission denied" in output and "s3cret" not in output


async def test_root_only_when_the_agent_allows_it_and_the_job_asks(services: Services, client: Client) -> None:
    # Given one agent that does not allow root
    await services.start_system(agents=1, JETCRON_AGENT_JOB_USER="nobody")

    # When a job asks for root, it does not start, and says why
    await client.call("jobs.create", now_job("rooty", "id", "-u", run_as_root=True, retry={"max_attempts": 1}))
    run = await the_run(client, "rooty", when=state_is("dead", "failed"), what="rooty to be refused")
    assert "JETCRON_AGENT_ALLOW_ROOT" in run["reason"]

    # Given an agent that allows it, a job asking for root runs as root, and one that does not ask does not
    services.start("agent-root", "agent", JETCRON_AGENT_ID="agent-root", JETCRON_AGENT_JOB_USER="nobody",
                   JETCRON_AGENT_ALLOW_ROOT="true", JETCRON_AGENT_LABELS="kind=root")
    await services["agent-root"].wait_logged("agent ready", 30)
    _, as_root = await _output(client, "root-ok", "id", "-u", run_as_root=True, require={"kind": "root"})
    _, plain = await _output(client, "not-root", "id", "-u", require={"kind": "root"})
    assert (as_root.strip(), plain.strip() != "0") == ("0", True)

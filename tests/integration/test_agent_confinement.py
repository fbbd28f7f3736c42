"""A job's process is confined: a clean environment, an unprivileged user, no way to the agent's credential."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from harness import Services, mint, run_cli, wait_for
from test_runs import now_job, state_is, the_run

from jetcron.auth.authority import Authority
from jetcron.auth.roles import Role
from jetcron.sdk.client import Client

ENDED = state_is("succeeded", "failed", "dead")
NEVER_SOON = {"kind": "cron", "cron": "0 0 1 1 *"}  # fires only when triggered during a test


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


async def _run_ended(client: Client, run_id: str) -> dict[str, Any]:
    async def ended() -> dict[str, Any] | None:
        run: dict[str, Any] = await client.call("runs.get", {"run_id": run_id})
        return run if ENDED(run) else None

    found: dict[str, Any] = await wait_for(ended, 30, what=f"run {run_id} to end")
    return found


async def test_root_only_for_a_tenant_whose_policy_allows_it_and_on_an_agent_that_allows_it(
        services: Services, client: Client, tmp_path: Path) -> None:
    # Given an agent that allows root and one that does not, each named by a label
    await services.start_system(agents=0)
    for name, allows, kind in (("agent-plain", "false", "plain"), ("agent-root", "true", "root")):
        services.start(name, "agent", JETCRON_AGENT_ID=name, JETCRON_AGENT_JOB_USER="nobody",
                       JETCRON_AGENT_ALLOW_ROOT=allows, JETCRON_AGENT_LABELS=f"kind={kind}")
    await services["agent-plain"].wait_logged("agent ready", 30)
    await services["agent-root"].wait_logged("agent ready", 30)
    url = services.server.url
    rooty = tmp_path / "rooty.json"
    rooty.write_text(json.dumps({"name": "rooty", "tenant": "acme", "command": ["id", "-u"], "run_as_root": True,
                                 "schedule": NEVER_SOON, "require": {"kind": "root"}, "retry": {"max_attempts": 1}}))

    # When the admin creates a job of tenant acme that asks for root, acme's policy saying nothing of it
    refused = run_cli(url, "jobs", "create", "-f", str(rooty))

    # Then it is refused, naming the field and the tenant's policy, and nothing is stored
    said = " ".join(refused.stderr.split())
    assert refused.returncode == 2, (refused.returncode, said)
    assert "run_as_root" in said and "tenant 'acme''s policy does not allow" in said, said
    assert (await client.call("jobs.list"))["items"] == []

    # Given the admin allows it in acme's policy
    allowed = run_cli(url, "tenants", "set", "acme", "--allow-run-as-root", "-o", "json")
    assert allowed.returncode == 0 and json.loads(allowed.stdout)["allow_run_as_root"] is True, allowed.stderr

    # When the job is created and run on the agent that allows root, it runs as root
    assert run_cli(url, "jobs", "create", "-f", str(rooty)).returncode == 0
    first = await _run_ended(client, (await client.call("jobs.trigger", {"name": "acme.rooty"}))["run_id"])
    output = (await client.call("runs.logs", {"run_id": first["run_id"]}))["output"]
    assert (first["state"], output.strip()) == ("succeeded", "0"), first

    # When the admin takes it back, the job already stored: its next attempt does not start, saying why
    assert run_cli(url, "tenants", "set", "acme").returncode == 0  # the whole policy replaced: root not allowed
    second = await _run_ended(client, (await client.call("jobs.trigger", {"name": "acme.rooty"}))["run_id"])
    output = (await client.call("runs.logs", {"run_id": second["run_id"]}))["output"]
    assert second["outcome"] == "start_failed" and output == "", second
    assert "tenant 'acme''s policy does not allow it" in second["reason"], second["reason"]

    # And where the tenant is allowed but the agent does not allow root, it does not start either
    assert run_cli(url, "tenants", "set", "acme", "--allow-run-as-root").returncode == 0
    await client.call("jobs.create", now_job("plain-root", "id", "-u", tenant="acme", run_as_root=True,
                                             require={"kind": "plain"}, retry={"max_attempts": 1}))
    run = await the_run(client, "acme.plain-root", when=ENDED, what="plain-root to be refused")
    assert run["outcome"] == "start_failed" and "JETCRON_AGENT_ALLOW_ROOT" in run["reason"], run
    # ... and a job that does not ask for root never runs as root, on either agent
    _, plain = await _output(client, "not-root", "id", "-u", require={"kind": "root"})
    assert plain.strip() not in ("", "0")

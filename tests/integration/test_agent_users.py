"""Who a job runs as: wherever the agent can switch users (root, or an agent that holds CAP_SETUID, CAP_SETGID,
CAP_CHOWN, CAP_DAC_OVERRIDE and CAP_KILL as ambient capabilities), each attempt runs as a uid of its own, with no
supplementary group and no capability, by default; an agent that cannot switch says so, in its log and in its
entry. Real agents, a real server; the agents run as another user through setpriv, which takes root."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from harness import ServiceProcess, Services, wait_for
from test_runs import now_job, state_is, the_run

from jetcron.core.host.uid_pool import LOCAL_RANGES
from jetcron.sdk.client import Client

pytestmark = pytest.mark.needs("root", "setpriv",
                               reason="starting an agent as another user, with capabilities, takes root and setpriv")
ENDED = state_is("succeeded", "failed", "dead")
AGENT_UID = 1  # daemon: a user of every Debian host, not root
HELD_GROUP = 6  # disk: a group that reaches something, as an engine socket's group does
SWITCHING = "+chown,+dac_override,+kill,+setgid,+setuid"
UIDS = range(4_100_000, 4_100_064)
"""Far from the ranges the agents of other tests give out (their locks are in another folder)."""
LOOK = ('exec 2>&1; id -u; id -G; grep -E "^Cap(Inh|Prm|Eff|Amb)" /proc/self/status | tr -d "\\t"; '
        'cat "$SECRET"; echo done')


def start_as(services: Services, name: str, setpriv: list[str], **env: str) -> ServiceProcess:
    """An agent running as AGENT_UID, with what `setpriv` adds (groups, capabilities)."""
    argv = ["setpriv", f"--reuid={AGENT_UID}", f"--regid={AGENT_UID}", *setpriv, "--",
            sys.executable, "-m", "jetcron_services.agent"]
    proc = ServiceProcess(name, argv, {**services.env, "JETCRON_AGENT_ID": name, "JETCRON_AGENT_JOB_USER": "nobody",
                                       "JETCRON_AGENT_LABELS": f"name={name}", **env},
                          services.log_dir / f"{name}.log").start()
    services.procs[name] = proc
    return proc


@pytest.fixture
def agents_own() -> Iterator[Path]:
    """A folder the agent's user owns, where it may reach it (/tmp: pytest's folders are root's, mode 0700); and,
    in /var/tmp where a job may look, a file only that user may read, as its credential is."""
    made = Path(tempfile.mkdtemp(prefix="jetcron-agent-user-", dir="/tmp"))
    secret = Path("/var/tmp") / f"jetcron-agent-user-secret-{os.getpid()}"
    secret.write_text("agent-only")
    for path, mode in ((made, 0o700), (secret, 0o600)):
        os.chown(path, AGENT_UID, AGENT_UID)
        path.chmod(mode)
    try:
        yield made
    finally:
        secret.unlink()
        shutil.rmtree(made, ignore_errors=True)


def secret_path() -> str:
    return str(Path("/var/tmp") / f"jetcron-agent-user-secret-{os.getpid()}")


async def agent_entry(client: Client, agent_id: str) -> dict[str, Any]:
    async def listed() -> dict[str, Any] | None:
        return next((a for a in (await client.call("agents.list"))["items"] if a["agent_id"] == agent_id), None)

    found: dict[str, Any] = await wait_for(listed, 15, what=f"{agent_id} registered")
    return found


@pytest.mark.parametrize("launcher", ["true", "false"], ids=["jetcron-launch", "twin"])
async def test_an_agent_with_the_capabilities_runs_each_attempt_as_a_uid_of_its_own_holding_nothing_of_its(
        services: Services, client: Client, agents_own: Path, launcher: str) -> None:
    # Given an agent that is not root, holds a supplementary group, and has the capabilities to switch users as
    # ambient ones; nothing set about uids but the range (the default gives one wherever the agent can switch)
    await services.start_system(agents=0)
    agent = start_as(services, "agent-caps", [f"--groups={HELD_GROUP}", f"--inh-caps={SWITCHING}",
                                              f"--ambient-caps={SWITCHING}"],
                     JETCRON_DATA_DIR=str(agents_own / "data"), JETCRON_AGENT_LAUNCHER=launcher,
                     JETCRON_AGENT_JOB_UIDS=f"{UIDS.start}-{UIDS.stop - 1}",
                     JETCRON_AGENT_JOB_UID_LOCKS=str(agents_own / "locks"))
    await agent.wait_logged("agent ready", 30)
    assert f'"launcher": {launcher}' in agent.output()

    # When a job looks at who it is, what it holds, and at a file only the agent's user may read
    await client.call("jobs.create", now_job("look", "sh", "-c", LOOK, env={"SECRET": secret_path()},
                                             retry={"max_attempts": 1}))
    run = await the_run(client, "look", when=ENDED, what="look to end")
    uid, groups, *rest = (await client.call("runs.logs", {"run_id": run["run_id"]}))["output"].splitlines()

    # Then it ran as a uid of its own, whose only group is its own gid: not the agent's user, nor its group
    assert int(uid) in UIDS, (uid, rest)
    assert groups.split() == [uid], f"the job holds groups {groups}"
    # And with no capability at all (the agent's would let it become root)
    caps = dict(line.split(":") for line in rest if line.startswith("Cap"))
    assert caps == {"CapInh": "0" * 16, "CapPrm": "0" * 16, "CapEff": "0" * 16, "CapAmb": "0" * 16}, caps
    # And it could not read what only the agent's user may
    assert "agent-only" not in rest and any("Permission denied" in line for line in rest), rest
    assert rest[-1] == "done"
    # And its entry says its jobs run as uids of their own
    assert (await agent_entry(client, "agent-caps"))["job_user"] == "@own-uid"


async def test_an_agent_that_cannot_switch_users_says_so_in_its_log_and_its_entry(
        services: Services, client: Client, agents_own: Path) -> None:
    # Given an agent that is not root and holds none of the capabilities to switch users (only the one that lets
    # it reach its interpreter here, under root's home)
    await services.start_system(agents=0)
    agent = start_as(services, "agent-plain", [f"--groups={HELD_GROUP}", "--inh-caps=+dac_read_search",
                                               "--ambient-caps=+dac_read_search"],
                     JETCRON_DATA_DIR=str(agents_own / "data"))
    await agent.wait_logged("agent ready", 30)

    # Then it says, once, that its jobs run as its own user with its groups, and why
    said = [line for line in agent.output().splitlines() if "cannot switch users" in line]
    assert len(said) == 1, agent.output()
    assert "jobs run as this agent's own user daemon and its supplementary groups (6)" in said[0]
    assert "CAP_SETUID" in said[0]
    # And its entry says so too
    assert (await agent_entry(client, "agent-plain"))["job_user"] == "@agent"


async def test_a_root_agent_gives_each_attempt_a_uid_of_its_own_by_default(services: Services, client: Client) -> None:
    # Given a root agent with the deployed defaults: jobs as nobody, nothing said of uids
    await services.start_system(agents=1, JETCRON_AGENT_JOB_USER="nobody")

    # When two jobs run at once
    for name in ("first", "second"):
        await client.call("jobs.create", now_job(name, "sh", "-c", "id -u; id -G; sleep 1"))
    runs = [await the_run(client, name, when=ENDED, what=f"{name} to end") for name in ("first", "second")]
    seen = [(await client.call("runs.logs", {"run_id": r["run_id"]}))["output"].split() for r in runs]

    # Then each ran as a uid of its own from the first range the host leaves free, with no other group
    assert [any(int(uid) in r for r in LOCAL_RANGES) and groups == [uid] for uid, *groups in seen] == [True, True], \
        seen
    assert seen[0][0] != seen[1][0], seen
    # And the agent's entry says so
    assert (await agent_entry(client, "agent-1"))["job_user"] == "@own-uid"

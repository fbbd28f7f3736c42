"""A job's view of a shared host, through the running services (docs/security.md, "A job's view of the host"):
each attempt in a private scratch that goes when it ends, however it ends; jobs of two tenants, each with a uid of
its own, reach neither each other's scratch nor the agent's files.

Only an agent running as root can give a job another user, a scratch of that user's and a private /tmp: these
tests run as root, like an agent container does, and are skipped otherwise.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from harness import Services, pid_alive, wait_for
from test_runs import now_job, state_is, the_run

from jetcron.sdk.client import Client

pytestmark = pytest.mark.needs("root", reason="only a root agent runs jobs as other users")
ENDED = state_is("succeeded", "failed", "dead")
ONE_ATTEMPT = {"retry": {"max_attempts": 1}}
# What a job sees: its working directory, what it is told, its scratch's mode and owner, its uid, its /tmp, HOME
LOOK = 'pwd; echo "$JETCRON_SCRATCH"; echo "$TMPDIR"; stat -c "%a %u" .; id -u; touch here; ls -A /tmp'


@pytest.fixture
def data_dir() -> Iterator[Path]:
    """A data dir outside /tmp, so that a job's private /tmp does not hide it: only its mode keeps jobs out."""
    made = Path(tempfile.mkdtemp(prefix="jetcron-view-", dir="/var/tmp"))
    try:
        yield made
    finally:
        shutil.rmtree(made, ignore_errors=True)


def scratches(agent_dir: Path) -> list[Path]:
    """The attempts' scratches in the agent's folder: those a job's user owns (a spare's waits there too, the
    agent's own until a run takes it)."""
    return sorted(p for p in agent_dir.iterdir() if p.stat().st_uid != os.geteuid()) if agent_dir.exists() else []


async def output_of(client: Client, run: dict[str, Any]) -> str:
    return str((await client.call("runs.logs", {"run_id": run["run_id"]}))["output"])


async def test_a_job_starts_in_a_scratch_of_its_own_which_goes_however_the_attempt_ends(
        services: Services, client: Client) -> None:
    # Given an agent running as root that runs jobs as nobody
    await services.start_system(agents=1, JETCRON_AGENT_JOB_USER="nobody")
    agent_dir = Path(services.env["JETCRON_DATA_DIR"]) / "scratch" / "agent-1"
    private = "no private /tmp" not in services["agent-1"].output()

    # When a job looks where it is
    await client.call("jobs.create", now_job("look", "sh", "-c", LOOK))
    run = await the_run(client, "look", when=ENDED)
    cwd, scratch, tmpdir, owned, uid, *listing = (await output_of(client, run)).splitlines()

    # Then its working directory is its scratch, and JETCRON_SCRATCH and TMPDIR say so: /tmp itself where the job
    # has a private /tmp (holding only what the job made), else the scratch's folder under the agent's
    assert run["state"] == "succeeded", listing
    assert cwd == scratch == tmpdir
    assert (cwd == "/tmp") if private else (Path(cwd).parent == agent_dir)
    if private:
        assert listing == ["here"]
    # And it is the job user's alone
    assert int(uid) != 0 and owned == f"700 {uid}"
    # And it is gone once the attempt has ended: succeeded...
    await wait_for(lambda: not scratches(agent_dir), 10, what="the scratch to be removed")

    # ... failed ...
    await client.call("jobs.create", now_job("fails", "sh", "-c", "echo x > f; exit 3", **ONE_ATTEMPT))
    assert (await the_run(client, "fails", when=ENDED))["exit_code"] == 3
    await wait_for(lambda: not scratches(agent_dir), 10, what="a failed attempt's scratch to be removed")

    # ... timed out (while it ran, it was there, the job's, mode 0700)
    await client.call("jobs.create", now_job("slow", "sh", "-c", "touch f; sleep 30", timeout_seconds=2,
                                             **ONE_ATTEMPT))
    await wait_for(lambda: any((s / "f").exists() for s in scratches(agent_dir)), 10, what="the slow job's scratch")
    (held,) = scratches(agent_dir)
    assert held.stat().st_mode & 0o777 == 0o700 and held.stat().st_uid not in (0, os.geteuid())  # the job's user
    assert (await the_run(client, "slow", when=ENDED, timeout=30))["outcome"] == "timed_out"
    await wait_for(lambda: not held.exists(), 10, what="a timed-out attempt's scratch to be removed")

    # ... and when the agent was killed with SIGKILL with its reaper, its restart removes what was left
    await client.call("jobs.create", now_job("orphan", "sh", "-c", "echo $$ > pid; sleep 60", **ONE_ATTEMPT))
    await wait_for(lambda: any((s / "pid").exists() and (s / "pid").read_text().strip()
                               for s in scratches(agent_dir)), 10, what="the orphan's scratch")
    (left,) = scratches(agent_dir)
    sleeper = int((left / "pid").read_text())
    agent = services["agent-1"]
    agent.note_descendants()
    reaper = next(p for p in agent.seen if b"agent.host.reaper" in Path(f"/proc/{p}/cmdline").read_bytes())
    os.kill(reaper, 9)
    agent.kill9()
    await asyncio.sleep(0.5)
    assert left.exists()
    del services.procs["agent-1"]
    again = services.start("agent-1", "agent", JETCRON_AGENT_ID="agent-1", JETCRON_AGENT_JOB_USER="nobody")
    await wait_for(lambda: again.output().count("agent ready") == 2, 30, what="agent-1 to be ready again")
    assert not left.exists() and not pid_alive(sleeper)
    assert "removed scratch directories from an earlier life" in again.output()


async def test_jobs_with_uids_of_their_own_reach_neither_each_others_scratch_nor_the_agents_files(
        services: Services, client: Client, data_dir: Path) -> None:
    # Given an agent that gives each attempt a uid of its own, its data dir outside /tmp
    await services.start_system(agents=1, JETCRON_AGENT_JOB_USER="nobody", JETCRON_AGENT_JOB_UIDS="60578-61183",
                                JETCRON_DATA_DIR=str(data_dir))
    agent_dir = data_dir / "scratch" / "agent-1"
    assert data_dir.stat().st_mode & 0o077 in (0, 0o011), oct(data_dir.stat().st_mode)  # listable by no one else

    # And a job of tenant acme holding a note in its scratch, running
    await client.call("jobs.create", now_job("holder", "sh", "-c", "echo acme-secret > note; id -u > uid; "
                                             "echo $$ > pid; sleep 30", tenant="acme", **ONE_ATTEMPT))
    await wait_for(lambda: any((s / "pid").exists() and (s / "pid").read_text().strip()
                               for s in scratches(agent_dir)), 15, what="acme's job to hold its note")
    (held,) = scratches(agent_dir)
    pid, acme_uid = (held / "pid").read_text().strip(), int((held / "uid").read_text())

    # When a job of tenant beta tries every way to it, and to the agent's files
    tries = [f"/proc/{pid}/cwd/note", f"/proc/{pid}/root/tmp/note", f"{held}/note", f"/proc/{pid}/environ",
             f"{data_dir}/agent-agent-1.pgids"]
    # (its errors go into its output's pipe: the log merges two pipes in no fixed order, and may cut a line of one
    # with a line of the other)
    script = ("exec 2>&1; id -u; " + "; ".join(f"cat {t}" for t in tries)
              + f"; ls {data_dir}; ls {agent_dir}; echo tried")
    await client.call("jobs.create", now_job("peeker", "sh", "-c", script, tenant="beta", **ONE_ATTEMPT))
    peek = await the_run(client, "beta.peeker", when=ENDED)
    output = await output_of(client, peek)

    # Then it ran as a uid of its own, and every try was refused
    beta_uid, *said = output.splitlines()
    assert 60578 <= acme_uid <= 61183 and 60578 <= int(beta_uid) <= 61183 and int(beta_uid) != acme_uid
    assert said[-1] == "tried" and "acme-secret" not in output, output
    refused = [line for line in said if "Permission denied" in line]
    assert len(refused) == len(tries) + 2, output

    # And when acme's run is cancelled, its scratch goes and its uid's processes with it
    await client.call("runs.cancel", {"run_id": (await the_run(client, "acme.holder"))["run_id"]})
    await wait_for(lambda: not held.exists(), 15, what="the cancelled attempt's scratch to be removed")
    assert not pid_alive(int(pid))

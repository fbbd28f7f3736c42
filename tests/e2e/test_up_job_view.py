"""`jetcron up` as a new user runs it, seen from a job (docs/security.md, "A job's view of the host"): the job starts
in a scratch of its own, and can list none of the data dir and read none of the services' logs, the NATS server's
config or the credentials beside them; and, each attempt running as a uid of its own, a job of one tenant reaches
nothing of another tenant's running job: not its scratch, nor through /proc its working directory or environment."""

from __future__ import annotations

import grp
import os
import pwd
import shutil
import stat
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from harness import add_failure_report, wait_until
from test_up import Up, jetcron, json_of, wait_ready

from jetcron.bus.server import free_port
from jetcron.cli.up import local_job_uids
from jetcron.core.host.uid_pool import parse_uid_range

pytestmark = [pytest.mark.timeout(150),
              pytest.mark.needs("root", reason="only a root agent runs jobs as another user")]


@pytest.fixture
def up(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Up]:
    # The data dir outside /tmp: a job's private /tmp would hide it, and only its modes must keep the job out here
    home = Path(tempfile.mkdtemp(prefix="jetcron-up-", dir="/var/tmp"))
    system = Up(free_port(), home / "jetcron", tmp_path / "up.log")
    add_failure_report(request, "jetcron up output and service logs", system.report)
    try:
        yield system
    finally:
        system.cleanup()
        shutil.rmtree(home, ignore_errors=True)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def ended_run(up: Up, job: str) -> dict[str, object]:
    def ended() -> dict[str, object] | None:
        runs = json_of(up, "runs", "list", "--job", job)
        return runs[0] if runs and runs[0]["state"] in ("succeeded", "failed", "dead", "cancelled") else None

    return wait_until(ended, 30, interval=0.3, what=f"{job}'s run to end")


def held_scratch(data: Path) -> Path | None:
    """The scratch of the one running job that has written its pid (the test runs as root: it may look)."""
    held = [s for s in (data / "scratch").glob("agent-*/*") if (s / "pid").exists() and (s / "pid").read_text()]
    return held[0] if len(held) == 1 else None


def test_a_job_on_jetcron_up_starts_in_its_scratch_and_reads_none_of_the_data_dir(up: Up) -> None:
    # Given `jetcron up` as root, as it comes (jobs run as another user: a uid of their own)
    up.start()
    wait_ready(up)
    data = up.data_dir

    # Then what it keeps is its user's alone: the data dir, the logs, the NATS store and config, the keys
    assert mode(data) in (0o700, 0o711)  # 0711 only where jobs get no private /tmp and must pass through it
    assert (mode(data / "logs"), mode(data / "nats"), mode(data / "auth")) == (0o700, 0o700, 0o700)
    logs = sorted((data / "logs").glob("*.log"))
    assert len(logs) >= 8 and {mode(log) for log in logs} == {0o600}, logs
    assert mode(data / "nats" / "jetcron.conf") == 0o600 and mode(data / "auth" / "admin.creds") == 0o600

    # When a job looks where it is and tries to read them
    secrets = [data / "logs" / "api.log", data / "logs" / "agent-1.log", data / "nats" / "jetcron.conf",
               data / "auth" / "admin.creds", data / "auth" / "creds" / "agent-1.creds"]
    # (errors into the output's pipe: two pipes reach the log in no fixed order, a line of one cut by the other)
    script = f'exec 2>&1; pwd; echo "$TMPDIR"; ls {data}; ' + "; ".join(f"cat {p}" for p in secrets) + "; echo tried"
    created = jetcron(up, "jobs", "create", "peek", "--at", "now", "--", "sh", "-c", script)
    assert created.returncode == 0, created.stderr

    def ended() -> dict[str, object] | None:
        runs = json_of(up, "runs", "list", "--job", "peek")
        return runs[0] if runs and runs[0]["state"] in ("succeeded", "failed", "dead") else None

    run = wait_until(ended, 30, interval=0.3, what="the job to end")
    said = jetcron(up, "runs", "logs", str(run["run_id"])).stdout

    # Then it started in its scratch (its private /tmp, or the scratch's own path), and every read was refused
    lines = said.splitlines()
    assert run["state"] == "succeeded" and lines[-1] == "tried", said
    assert lines[0] == lines[1] and (lines[0] == "/tmp" or lines[0].startswith(str(data / "scratch" / "agent-")))
    assert sum("Permission denied" in line for line in lines) == len(secrets) + 1, said
    assert "BEGIN NATS USER JWT" not in said and "jetstream" not in said and "agent ready" not in said


def test_on_jetcron_up_a_job_of_one_tenant_reaches_nothing_of_another_tenants_running_job(
        up: Up, record_property: Callable[[str, object], None]) -> None:
    # Given `jetcron up` as root, as it comes: its agents give each attempt a uid of its own, and it says so
    up.start()
    wait_ready(up)
    data = up.data_dir
    env, said = local_job_uids(0, {}, 2, {p.pw_uid for p in pwd.getpwall()}, {g.gr_gid for g in grp.getgrall()})
    uids = parse_uid_range(env["JETCRON_AGENT_JOB_UIDS"])
    assert f"jetcron up: {said}" in up.output().splitlines(), up.output()

    # And a job of tenant acme, a secret in its environment and a note in its scratch, running
    holder = jetcron(up, "jobs", "create", "holder", "--tenant", "acme", "--max-attempts", "1", "--at", "now",
                     "-e", "ACME_TOKEN=acme-env-secret", "--", "sh", "-c",
                     "echo acme-note-secret > note; id -u > uid; echo $$ > pid; sleep 60")
    assert holder.returncode == 0, holder.stderr
    held = wait_until(lambda: held_scratch(data), 30, interval=0.2, what="acme's job to hold its note")
    pid, acme_uid = int((held / "pid").read_text()), int((held / "uid").read_text())
    assert (mode(held), held.stat().st_uid, held.stat().st_gid) == (0o700, acme_uid, acme_uid)

    # When a job of tenant beta tries every way to it: its scratch by path, its working directory, its root (a private
    # /tmp is its scratch), its environment, and the agents' log beside them
    tries = [f"{held}/note", f"/proc/{pid}/cwd/note", f"/proc/{pid}/root/tmp/note", f"/proc/{pid}/environ",
             f"{data}/logs/agent-1.log"]
    # (errors into the output's pipe: two pipes reach the log in no fixed order, a line of one cut by the other)
    script = ("exec 2>&1; id -u; " + "; ".join(f"cat {t}" for t in tries)
              + f"; ls {held}; ls /proc/{pid}/cwd; echo tried")
    peeker = jetcron(up, "jobs", "create", "peeker", "--tenant", "beta", "--max-attempts", "1", "--at", "now",
                     "--", "sh", "-c", script)
    assert peeker.returncode == 0, peeker.stderr
    peek = ended_run(up, "beta.peeker")
    output = jetcron(up, "runs", "logs", str(peek["run_id"])).stdout

    # Then acme's job was still running, each ran as a uid of its own of the range, and every try was refused
    assert os.path.exists(f"/proc/{pid}") and (held / "note").read_text() == "acme-note-secret\n"
    beta_uid, *lines = output.splitlines()
    assert acme_uid in uids and int(beta_uid) in uids and int(beta_uid) != acme_uid, output
    assert peek["state"] == "succeeded" and lines[-1] == "tried", output
    refused = sum("Permission denied" in line for line in lines)
    assert refused == len(tries) + 2, output
    assert "acme-note-secret" not in output and "acme-env-secret" not in output

    # And acme's run, cancelled, takes its scratch and its uid's processes with it
    (acme_run,) = json_of(up, "runs", "list", "--job", "acme.holder")
    cancelled_at = time.monotonic()
    assert jetcron(up, "runs", "cancel", str(acme_run["run_id"])).returncode == 0
    wait_until(lambda: not held.exists() and not os.path.exists(f"/proc/{pid}"), 15, interval=0.05,
               what="the cancelled attempt's scratch and process to go")
    gone_s = time.monotonic() - cancelled_at
    assert ended_run(up, "acme.holder")["state"] == "cancelled"
    # docs/guarantees.md's row (make chaos): the tries refused, and how long the scratch outlived the cancel
    record_property("figures", {"tries_refused": refused, "scratch_gone_s": round(gone_s, 3)})

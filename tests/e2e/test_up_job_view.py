"""`jetcron up` as a new user runs it, seen from a job (docs/security.md, "A job's view of the host"): the job starts
in a scratch of its own, and can list none of the data dir and read none of the services' logs, the NATS server's
config or the credentials beside them."""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from harness import add_failure_report, wait_until
from test_up import Up, jetcron, json_of, wait_ready

from jetcron.bus.server import free_port

pytestmark = [pytest.mark.timeout(150),
              pytest.mark.skipif(os.geteuid() != 0, reason="only a root agent runs jobs as another user (nobody)")]


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


def test_a_job_on_jetcron_up_starts_in_its_scratch_and_reads_none_of_the_data_dir(up: Up) -> None:
    # Given `jetcron up` as root, as it comes (jobs run as nobody)
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

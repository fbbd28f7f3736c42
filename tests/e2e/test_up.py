"""`jetcron up` and the README's commands, exactly as a user types them; stop, leave nothing behind, restart."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from harness import add_failure_report, clean_env, descendants, kill_leftovers, still_running, wait_until

from jetcron.bus.server import free_port

# A hang guard, not a speed check: `up` starts twice here, each a whole system (50-60 s under a loaded suite)
pytestmark = pytest.mark.timeout(150)

# The `jetcron` console script is `jetcron.cli.main:main`; calling it through this interpreter needs no PATH.
JETCRON = [sys.executable, "-c", "from jetcron.cli.main import main; main()"]
RUN_FIELDS = ("run_id", "job", "state", "attempt", "agent", "scheduled_at", "started_at", "finished_at",
              "exit_code", "reason")


class Up:
    """One `jetcron up` process with its output in a file."""

    def __init__(self, port: int, data_dir: Path, log: Path) -> None:
        self.port, self.data_dir, self.log = port, data_dir, log
        self.http_port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.seen: dict[int, int] = {}

    def start(self) -> None:
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                [*JETCRON, "up", "--port", str(self.port), "--data-dir", str(self.data_dir), "--agents", "2",
                 "--http-port", str(self.http_port)],
                env=clean_env(), stdout=out, stderr=subprocess.STDOUT, start_new_session=True)

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def stop(self, timeout: float = 40.0) -> int:
        """SIGTERM, as Ctrl-C would; returns the exit code."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.seen.update(descendants(self.proc.pid))
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode

    def cleanup(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.stop()
        kill_leftovers(self.seen)

    def report(self) -> str:
        tails = [f"----- {p.name}\n" + "\n".join(p.read_text(errors="replace").splitlines()[-40:])
                 for p in sorted((self.data_dir / "logs").glob("*.log"))]
        return "\n".join([self.output(), *tails])


@pytest.fixture
def up(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Up]:
    system = Up(free_port(), tmp_path / "jetcron", tmp_path / "up.log")
    add_failure_report(request, "jetcron up output and service logs", system.report)
    try:
        yield system
    finally:
        system.cleanup()


def jetcron(up: Up, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*JETCRON, *args], env=clean_env(JETCRON_NATS_URL=f"nats://127.0.0.1:{up.port}"),
                          capture_output=True, text=True, timeout=30, check=False)


def json_of(up: Up, *args: str) -> Any:
    result = jetcron(up, *args, "-o", "json")
    assert result.returncode == 0, f"jetcron {' '.join(args)} failed: {result.stderr}"
    return json.loads(result.stdout)


def wait_ready(up: Up) -> None:
    """Both agents registered: the server, the api and the agents all answer."""

    def ready() -> bool:
        assert up.proc is not None and up.proc.poll() is None, f"jetcron up exited:\n{up.output()}"
        result = jetcron(up, "agents", "list", "-o", "json")
        return result.returncode == 0 and len(json.loads(result.stdout)) == 2

    wait_until(ready, 40, interval=0.3, what="jetcron up to have 2 agents")


def one_line(text: str) -> str:
    """Rich wraps error lines at the terminal width: compare without the wrapping."""
    return " ".join(text.split())


def test_up_runs_the_readme_commands_stops_cleanly_and_restarts_with_its_state(up: Up) -> None:
    # Given `jetcron up` with two agents
    up.start()

    # Then it says when it is ready, after its banner, and by then the api and both agents answer
    wait_until(lambda: "jetcron up: ready" in up.output(), 60, interval=0.3, what="`jetcron up` to say it is ready")
    said = up.output()
    assert said.index("jetcron up: REST API at") < said.index("jetcron up: ready")
    assert [a["agent_id"] for a in json_of(up, "agents", "list")] == ["agent-1", "agent-2"]
    wait_ready(up)

    # When the README's job is created
    created = jetcron(up, "jobs", "create", "hello", "--at", "now", "--", "sh", "-c", "echo hi from $JETCRON_RUN_ID")
    assert created.returncode == 0, created.stderr
    assert "hello" in created.stdout

    # Then `runs list` shows its run reaching succeeded, with every documented field
    def succeeded() -> dict[str, Any] | None:
        runs = json_of(up, "runs", "list", "--job", "hello")
        return runs[0] if len(runs) == 1 and runs[0]["state"] == "succeeded" else None

    run = wait_until(succeeded, 30, interval=0.3, what="hello's run to succeed")
    assert set(RUN_FIELDS) <= set(run)
    assert (run["job"], run["attempt"], run["exit_code"], run["reason"]) == ("hello", 1, 0, "")
    assert run["agent"] in ("agent-1", "agent-2")
    assert run["scheduled_at"] <= run["started_at"] <= run["finished_at"]
    # with no tracing exporter configured, the run still has a trace id for its log lines and a later backend
    assert len(run["trace_id"]) == 32 and int(run["trace_id"], 16) != 0

    # And `runs logs` prints its output
    logs = jetcron(up, "runs", "logs", run["run_id"])
    assert logs.returncode == 0, logs.stderr
    assert f"hi from {run['run_id']}" in logs.stdout

    # And the REST API shows the same job to a token the CLI issued, and refuses a request without one
    token = jetcron(up, "tokens", "create", "--tenant", "default", "--name", "e2e")
    assert token.returncode == 0 and token.stdout.startswith("jct_"), token.stderr
    rest = f"http://127.0.0.1:{up.http_port}/api/v1/jobs/hello"

    def answered() -> httpx.Response | None:
        try:  # the gateway starts beside the other services: it may still be binding its port
            return httpx.get(rest, headers={"Authorization": f"Bearer {token.stdout.strip()}"}, timeout=10)
        except httpx.ConnectError:
            return None

    seen = wait_until(answered, 20, interval=0.3, what="the REST API to answer")
    assert seen.status_code == 200 and (seen.json()["status"], seen.json()["state"]) == ("completed", "succeeded"), \
        seen.text
    assert seen.json()["logs_url"] == f"http://127.0.0.1:{up.http_port}/api/v1/runs/{run['run_id']}/logs"
    assert httpx.get(rest, timeout=10).status_code == 401
    assert f"REST API at http://127.0.0.1:{up.http_port}/api/v1" in up.output()

    # And a connection without the admin credential is refused, with a named error, not a hang
    stranger = subprocess.run([*JETCRON, "--nats", f"nats://127.0.0.1:{up.port}", "jobs", "list"],
                              env=clean_env(XDG_CONFIG_HOME=str(up.data_dir / "elsewhere")), capture_output=True,
                              text=True, timeout=30, check=False)
    assert stranger.returncode == 1
    assert "error (unauthorized)" in one_line(stranger.stderr) and "refused" in one_line(stranger.stderr)

    # And invalid input exits 2 with the field and value named, and stores nothing
    bad_cron = jetcron(up, "jobs", "create", "bad", "--cron", "61 * * * *", "--", "true")
    assert bad_cron.returncode == 2
    assert "schedule.cron" in one_line(bad_cron.stderr) and "61 * * * *" in one_line(bad_cron.stderr)
    no_command = jetcron(up, "jobs", "create", "bad")
    assert no_command.returncode == 2
    assert [j["spec"]["name"] for j in json_of(up, "jobs", "list")] == ["hello"]

    # When `up` gets SIGTERM
    assert up.proc is not None
    assert up.stop() == 0
    # Then no process it started (services, agents, their reapers, nats-server) is left
    assert len(up.seen) >= 9, f"expected nats-server, 5 services, 2 agents and reapers: {up.seen}"
    assert still_running(up.seen) == []

    # And a command now says that nothing answers there, asking whether `jetcron up` runs
    stopped = jetcron(up, "jobs", "list")
    assert stopped.returncode == 1
    assert "nothing listens there; is `jetcron up` running?" in one_line(stopped.stderr), stopped.stderr

    # When it is started again on the same data directory
    up.start()
    wait_ready(up)

    # Then the job and its one run are still there, and the `now` job did not run again
    jobs = json_of(up, "jobs", "list")
    assert [(j["spec"]["name"], j["status"]) for j in jobs] == [("hello", "active")]
    runs = json_of(up, "runs", "list", "--job", "hello")
    assert [(r["run_id"], r["state"]) for r in runs] == [(run["run_id"], "succeeded")]


def test_up_killed_leaves_nothing_running_and_one_data_dir_has_one_up(up: Up, tmp_path: Path) -> None:
    # Given `jetcron up` running
    up.start()
    wait_ready(up)

    # When a second `up` is started on the same data directory
    second = Up(free_port(), up.data_dir, tmp_path / "second.log")
    second.start()
    assert second.proc is not None
    code = second.proc.wait(timeout=60)

    # Then it says one is running there, and starts nothing
    assert code == 1, second.output()
    assert up.proc is not None
    assert f"already running on {up.data_dir} (pid {up.proc.pid})" in one_line(second.output())
    assert jetcron(up, "agents", "list").returncode == 0

    # When the first is killed with SIGKILL (as the OOM killer would)
    up.seen.update(descendants(up.proc.pid))
    assert len(up.seen) >= 9, f"expected nats-server, 6 services, 2 agents and reapers: {up.seen}"
    up.proc.kill()
    up.proc.wait()

    # Then every process it started ends too (each child gets SIGTERM when `up` dies)
    wait_until(lambda: still_running(up.seen) == [], 40, interval=0.3,
               what=f"the children of a killed `up` to end: {still_running(up.seen)}")

    # And the data directory is free for the next `up`
    up.start()
    wait_ready(up)

"""The compose stack for real, with podman: the image `prepare.sh` built, three NATS nodes, the services and two
agents as containers; a job end to end; then kill -9 of a NATS container and an agent container mid-run, and the
run completes exactly once. `make test-deploy` runs this (not `make test`). podman-compose brings the stack up and
down; the containers are found, read, killed and stopped through the engine's API (podman_api.py)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest
import yaml
from podman_api import Engine, podman_env, until

from jetcron.bus.server import free_ports

if TYPE_CHECKING:
    from docker.models.containers import Container

pytestmark = pytest.mark.deploy
ROOT = Path(__file__).resolve().parents[2]
JETCRON = str(Path(sys.executable).parent / "jetcron")
IMAGE = os.environ.get("JETCRON_TEST_IMAGE", "localhost/jetcron:test")
# Everything but Prometheus, the OpenTelemetry collector and Grafana, whose images no registry here can give.
SERVICES = ["nats-1", "nats-2", "nats-3", "api-1", "api-2", "trigger-1", "trigger-2", "placement-1", "placement-2",
            "tracker-1", "tracker-2", "notifier-1", "notifier-2", "gateway-1", "gateway-2", "agent-1", "agent-2",
            "agent-images"]
AGENTS = ("agent-1", "agent-2", "agent-images")
JOB_IMAGE = "localhost/debian-python:bookworm"
"""prepare.sh's base image, in the host engine's store: what a sibling container runs."""


def _run(*argv: str, timeout: float = 300, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, env=podman_env(), check=False)
    if check and done.returncode != 0:
        raise AssertionError(f"{' '.join(argv)} exited {done.returncode}:\n{done.stdout[-2000:]}\n"
                             f"{done.stderr[-3000:]}")
    return done


@dataclass
class Stack:
    engine: Engine
    directory: Path
    project: str
    nats_port: int
    http_port: int
    """gateway-1's REST API and dashboard."""

    def compose(self, *args: str, timeout: float = 600, check: bool = True) -> subprocess.CompletedProcess[str]:
        return _run(sys.executable, "-m", "podman_compose", "--profile", "sibling", "-p", self.project, "-f",
                    str(self.directory / "compose.yaml"), *args, timeout=timeout, check=check)

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        gen = self.directory / "generated"
        return _run(JETCRON, "--nats", f"nats://127.0.0.1:{self.nats_port}", "--tls-ca", str(gen / "tls" / "ca.pem"),
                    "--creds", str(gen / "auth" / "admin.creds"), *args, timeout=60, check=False)

    def json(self, *args: str) -> Any:
        done = self.cli(*args, "-o", "json")
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    def ready(self) -> dict[str, Any]:
        """`jetcron status` once every role has a ready instance and every agent is up."""
        def up() -> dict[str, Any] | None:
            st: dict[str, Any] = self.json("status")
            roles = {i["service"] for i in st["services"] if i["ready"]}
            wanted = {"api", "trigger", "placement", "run_tracker", "notifier", "gateway"}
            return st if {a["agent_id"] for a in st["agents"]} == set(AGENTS) and roles >= wanted else None

        status: dict[str, Any] = until("every service ready and every agent up", up, 240)
        return status

    def container(self, service: str) -> Container:
        return self.engine.service(self.project, service)

    def logs(self) -> str:
        return self.engine.logs_of(self.project, SERVICES)




@pytest.fixture(scope="module")
def stack(engine: Engine, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    engine.image(IMAGE)
    directory = tmp_path_factory.mktemp("compose") / "compose"
    shutil.copytree(ROOT / "deploy" / "compose", directory, ignore=shutil.ignore_patterns("generated"))
    shutil.copytree(ROOT / "deploy" / "prometheus", directory.parent / "prometheus")
    init = _run(JETCRON, "deploy", "init", "--dir", str(directory / "generated"), "--owner", "10001",
                "--agent", "agent-images")
    assert "credentials for" in init.stdout
    # This machine's own free loopback ports instead of the file's fixed ones; short leases, fast failover.
    nats_port, monitor, http1, http2, prom = free_ports(5)
    text = (directory / "compose.yaml").read_text()
    for old, new in (('"127.0.0.1:4222:4222"', f'"127.0.0.1:{nats_port}:4222"'),
                     ('"127.0.0.1:8222:8222"', f'"127.0.0.1:{monitor}:8222"'),
                     ('"127.0.0.1:8080:8080"', f'"127.0.0.1:{http1}:8080"'),
                     ('"127.0.0.1:8081:8080"', f'"127.0.0.1:{http2}:8080"'),
                     ('"127.0.0.1:9090:9090"', f'"127.0.0.1:{prom}:9090"')):
        assert old in text, old
        text = text.replace(old, new)
    # agent-2 gets container limits: it must advertise them, not the host's cores and memory
    text = text.replace("  agent-2:\n    <<: [*service, *agent]\n",
                        "  agent-2:\n    <<: [*service, *agent]\n    cpus: 1.5\n    mem_limit: 700m\n")
    assert "mem_limit: 700m" in text
    (directory / "compose.yaml").write_text(text)
    # The host engine's API socket (podman's Docker-compatible service), for the agent that runs sibling containers;
    # root's, reached by its group (the compose file's group_add)
    with (directory / ".env").open("a") as env:
        env.write(f"JETCRON_AGENT_IMAGE={IMAGE}-docker\nCONTAINER_ENGINE_SOCKET={engine.socket}\n"
                  f"CONTAINER_ENGINE_GID={engine.socket.stat().st_gid}\n")
        env.write(f"JETCRON_IMAGE={IMAGE}\nJETCRON_RUN_LEASE_TTL=4\nJETCRON_LEADER_LEASE_TTL=3\nJETCRON_HEARTBEAT=1\n"
                  "JETCRON_ASSIGN_STALL=6\nJETCRON_REDRIVE_AFTER=6\nOTEL_TRACES_EXPORTER=none\n")
    # the file the operator reads and the one run here must not drift apart
    assert set(SERVICES) <= set(yaml.safe_load(text)["services"])
    s = Stack(engine, directory, f"jctest{os.getpid()}", nats_port, http1)
    try:
        s.compose("up", "-d", *SERVICES)
        yield s
    finally:
        s.compose("down", "-v", "-t", "5", timeout=300, check=False)


def test_the_stack_comes_up_and_runs_a_job(stack: Stack) -> None:
    try:
        status = stack.ready()
        assert len([i for i in status["services"] if i["ready"]]) >= 12
        assert status["placement_leader"] and status["tracker_leader"]
        limited = next(a for a in status["agents"] if a["agent_id"] == "agent-2")
        assert (limited["cpu"], limited["memory_mb"]) == (1.5, 700), limited
        # Only the agent given the engine's socket says it can run containers (a CLI without an engine does not)
        capable = {a["agent_id"]: "container" in a["capabilities"] for a in stack.json("agents", "list")}
        assert capable == {"agent-1": False, "agent-2": False, "agent-images": True}, capable
        made = stack.cli("jobs", "create", "hello", "--at", "now", "--", "sh", "-c", "echo hi from a container")
        assert made.returncode == 0, made.stderr
        run = until("hello to succeed", lambda: [r for r in stack.json("runs", "list", "--job", "hello")
                                                  if r["state"] == "succeeded"], 90)[0]
        logs = stack.cli("runs", "logs", run["run_id"])
        assert "hi from a container" in logs.stdout, logs
        # The image carries the dashboard's templates and static files (package data, not only source files)
        base = f"http://127.0.0.1:{stack.http_port}/ui"
        login = httpx.get(f"{base}/login", timeout=10)
        assert login.status_code == 200 and 'label for="token"' in login.text, login.text[:500]
        htmx = httpx.get(f"{base}/static/htmx-2.0.11.min.js", timeout=10)
        assert htmx.status_code == 200 and len(htmx.content) > 40_000
        assert httpx.get(base, timeout=10, follow_redirects=False).headers["location"] == "/ui/login?next=/ui"
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{stack.logs()}") from None


# Before the tests that kill and stop containers: it needs the whole stack up.
@pytest.mark.timeout(300)
def test_an_image_job_runs_as_a_sibling_container_through_the_hosts_engine(stack: Stack, tmp_path: Path) -> None:
    try:
        stack.ready()
        spec = {"name": "sibling", "image": JOB_IMAGE, "schedule": {"kind": "now"}, "env": {"GREETING": "hello"},
                "command": ["sh", "-c", "echo \"$GREETING from $(hostname)\"; sleep 4; exit 3"],
                "retry": {"max_attempts": 1}}
        (tmp_path / "sibling.json").write_text(json.dumps(spec))
        made = stack.cli("jobs", "create", "-f", str(tmp_path / "sibling.json"))
        assert made.returncode == 0, made.stderr
        running = until("sibling to start", lambda: [r for r in stack.json("runs", "list", "--job", "sibling")
                                                      if r["state"] not in ("scheduled", "assigned")], 120)[0]
        assert (running["state"], running["agent"]) == ("running", "agent-images"), (
            running, stack.json("runs", "get", running["run_id"]), stack.cli("runs", "logs", running["run_id"]).stdout)
        # While it runs, the host's engine runs it: a container beside the agent's, carrying the agent's label
        beside = until("the sibling container on the host", lambda: [
            c.name for c in stack.engine.labelled("jetcron.agent=agent-images")], 30)
        assert beside == [f"jc-{running['run_id']}-1"], beside
        # Then the run ends with the container's own exit code, its output read back, and the container removed
        (run,) = until("sibling to end", lambda: [r for r in stack.json("runs", "list", "--job", "sibling")
                                                   if r["state"] in ("succeeded", "failed", "dead")], 60)
        assert run["state"] in ("failed", "dead"), run
        history = stack.json("runs", "get", run["run_id"])["history"]
        assert history[-1]["exit_code"] == 3, history
        logs = stack.cli("runs", "logs", run["run_id"])
        hosts = [line.split("hello from ", 1)[1] for line in logs.stdout.splitlines() if "hello from " in line]
        assert hosts and hosts[0] not in ("", "agent-images"), logs  # its own host name, not the agent's
        until("the container removed", lambda: not stack.engine.labelled("jetcron.agent=agent-images",
                                                                          stopped_too=True), 30)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{stack.logs()}") from None


def test_kill_9_of_a_nats_node_and_an_agent_mid_run_and_the_run_completes_once(stack: Stack) -> None:
    try:
        made = stack.cli("jobs", "create", "long", "--at", "now", "--max-attempts", "3", "--", "sleep", "12")
        assert made.returncode == 0, made.stderr
        running = until("long to run", lambda: [r for r in stack.json("runs", "list", "--job", "long")
                                                 if r["state"] == "running"], 90)[0]
        # When the agent running it and a NATS node (not the one the CLI uses) are killed with SIGKILL
        stack.container(running["agent"]).kill(signal="KILL")
        stack.container("nats-3").kill(signal="KILL")
        # Then the run still ends succeeded, once, within two attempts (the second on the other agent)
        done = until("long to finish", lambda: [r for r in stack.json("runs", "list", "--job", "long")
                                                 if r["state"] in ("succeeded", "failed", "dead")], 180)
        assert len(stack.json("runs", "list", "--job", "long")) == 1
        assert done[0]["state"] == "succeeded" and done[0]["attempt"] <= 2, done
        history = stack.json("runs", "get", done[0]["run_id"])["history"]
        assert len([a for a in history if a["outcome"] == "succeeded"]) <= 1
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{stack.logs()}") from None


def test_stopping_an_agent_container_drains_it(stack: Stack) -> None:
    try:
        made = stack.cli("jobs", "create", "drained", "--at", "now", "--max-attempts", "1", "--", "sleep", "4")
        assert made.returncode == 0, made.stderr
        running = until("drained to run", lambda: [r for r in stack.json("runs", "list", "--job", "drained")
                                                    if r["state"] == "running"], 90)[0]
        # When its agent's container is stopped (SIGTERM, then 30 s of grace)
        stack.container(running["agent"]).stop(timeout=30)
        # Then the attempt was let finish: one attempt, succeeded, on that agent
        (run,) = stack.json("runs", "list", "--job", "drained")
        assert (run["state"], run["attempt"], run["agent"]) == ("succeeded", 1, running["agent"]), run
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{stack.logs()}") from None

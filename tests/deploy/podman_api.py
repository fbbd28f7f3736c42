"""The container engine the deploy tests drive: podman's Docker-compatible API (`podman system service` on a socket
of the tests' own), spoken to with the docker SDK that testcontainers brings, and testcontainers' own containers
over the same socket. podman-compose still brings the compose stack up and down (docs/decisions-testing.md)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

# Every run collects this directory and only `make test-deploy` selects it, so only it installs the `containers`
# extra: elsewhere the import may fail, and the engine fixture says so if a deploy test is ever run without it.
try:
    import docker
    import docker.errors
    from testcontainers.core.config import testcontainers_config
except ModuleNotFoundError as exc:
    MISSING: ModuleNotFoundError | None = exc
else:
    MISSING = None

if TYPE_CHECKING:
    from docker.models.containers import Container
    from docker.models.images import Image

ROOT = Path(__file__).resolve().parents[2]
CONTAINERS_CONF = ROOT / "tests" / "deploy" / "containers.conf"
"""This machine's podman settings (runc, no default ulimits): the CLI and the API service both read them."""


def podman_env() -> dict[str, str]:
    """The environment of every podman, podman-compose and host `jetcron` process the tests start: this machine's
    settings, none of jetcron's own (a developer's JETCRON_* must not reach the CLI run on the host), and not the
    DOCKER_HOST the tests point testcontainers with (podman works on its own store, not through its service)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("JETCRON_") and k != "DOCKER_HOST"}
    env["CONTAINERS_CONF"] = str(CONTAINERS_CONF)
    return env


def until(what: str, probe: Any, timeout: float) -> Any:
    """`probe()` every second until it gives something true (an assertion or a bad value meanwhile is kept as the
    last answer); AssertionError naming `what` and the last answer at `timeout`."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = probe()
        except (AssertionError, KeyError, ValueError, IndexError) as exc:
            last = exc
        else:
            if last:
                return last
        time.sleep(1)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}; last: {last!r}")


def text(logs: bytes) -> str:
    return logs.decode(errors="replace")


@dataclass
class Engine:
    socket: Path
    """The API socket, root's, its group allowed to write: what an agent container is given to run siblings."""
    client: docker.DockerClient

    @property
    def url(self) -> str:
        return f"unix://{self.socket}"

    def image(self, name: str) -> Image:
        try:
            return self.client.images.get(name)
        except docker.errors.ImageNotFound:
            pytest.fail(f"no image {name} in podman's store: run `make test-deploy`, which builds it")

    def health_check(self, name: str) -> list[str]:
        """The image's HEALTHCHECK command (["CMD-SHELL", line] or ["CMD", *argv]; [] if none). podman 4.3's
        Docker-compatible API leaves it out of the image's Config: its own inspect gives it."""
        done = subprocess.run(["podman", "image", "inspect", name], capture_output=True, text=True, env=podman_env(),
                              timeout=60, check=False)
        assert done.returncode == 0, done.stderr
        found: list[str] = (json.loads(done.stdout)[0].get("Healthcheck") or {}).get("Test") or []
        return found

    def service(self, project: str, service: str) -> Container:
        """The container of one compose service, found by the labels compose puts on it (podman-compose and
        docker compose alike), not by a container name one of them happens to make."""
        found = [c for c in self.client.containers.list(
                     all=True, ignore_removed=True, filters={"label": f"com.docker.compose.project={project}"})
                 if c.labels.get("com.docker.compose.service") == service]
        assert len(found) == 1, f"{len(found)} containers of service {service} in project {project}: {found}"
        return found[0]

    def labelled(self, label: str, *, stopped_too: bool = False) -> list[Container]:
        """Containers carrying a label (`name=value`), running ones unless stopped_too."""
        found: list[Container] = self.client.containers.list(all=stopped_too, ignore_removed=True,
                                                              filters={"label": label})
        return found

    def logs_of(self, project: str, services: list[str], tail: int = 40) -> str:
        """The last lines of each service's output (stdout and stderr), for a failure's report."""
        parts = []
        for name in services:
            try:
                logs = text(self.service(project, name).logs(tail=tail))
            except (AssertionError, docker.errors.APIError) as exc:
                logs = f"(no logs: {exc})"
            parts.append(f"----- {name}\n{logs}")
        return "\n".join(parts)


@contextmanager
def serve(socket: Path) -> Iterator[Engine]:
    """`podman system service` on `socket` for as long as the block runs; testcontainers and the docker SDK pointed
    at it (DOCKER_HOST), its reaper off."""
    if MISSING is not None:
        pytest.fail(f"the deploy tests drive podman through testcontainers, which is not installed ({MISSING}): "
                    "run `make test-deploy`, which installs the `containers` extra")
    if shutil.which("podman") is None:
        pytest.fail("podman is not installed: run `make test-deploy`, which installs it and builds the images")
    errors = socket.with_suffix(".log")
    with errors.open("wb") as err:
        process = subprocess.Popen(["podman", "system", "service", "--time=0", f"unix://{socket}"], env=podman_env(),
                                   stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
                                   start_new_session=True)
    docker_host = os.environ.get("DOCKER_HOST")
    try:
        client = _connect(socket, process, errors)
        # Agent containers reach the socket as its group (root's, the compose file's group_add), never as its owner.
        socket.chmod(0o660)
        os.environ["DOCKER_HOST"] = f"unix://{socket}"
        # Ryuk, testcontainers' reaper, needs a privileged container of an image no registry here gives; each test
        # removes exactly the containers it started instead (a `with` block, or compose down).
        testcontainers_config.ryuk_disabled = True
        yield Engine(socket, client)
        client.close()
    finally:
        if docker_host is None:
            os.environ.pop("DOCKER_HOST", None)
        else:
            os.environ["DOCKER_HOST"] = docker_host
        process.terminate()
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)


def _connect(socket: Path, process: subprocess.Popen[bytes], errors: Path) -> docker.DockerClient:
    deadline = time.monotonic() + 30
    last: Exception | None = None
    while time.monotonic() < deadline and process.poll() is None:
        if socket.exists():
            try:
                client = docker.DockerClient(base_url=f"unix://{socket}", timeout=120)
                if client.ping():
                    return client
            except docker.errors.DockerException as exc:
                last = exc
        time.sleep(0.2)
    pytest.fail(f"podman system service gave no API on {socket} (exit status {process.poll()}, last error {last!r}):"
                f"\n{errors.read_text(errors='replace')[-3000:]}")

"""The image on its own, started with testcontainers over podman's API: it is jetcron of this version, run by an
unprivileged user; its nats-server; a service in it that refuses a server acknowledging writes before fsync and
becomes ready (its own health check passing) on one that fsyncs; an agent from the image with the docker CLI that
reaches the engine's socket and so says it can run `image:` jobs. `make test-deploy` runs this (not `make test`)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest
from podman_api import Engine, text, until

# Collected by every run, selected only by `make test-deploy`, which installs the `containers` extra (the engine
# fixture fails plainly without it).
try:
    from testcontainers.core.container import DockerContainer
    from testcontainers.core.wait_strategies import ExecWaitStrategy, LogMessageWaitStrategy
except ModuleNotFoundError:
    pass

pytestmark = pytest.mark.deploy
IMAGE = os.environ.get("JETCRON_TEST_IMAGE", "localhost/jetcron:test")
VERSION = version("jetcron")
NATS_PORT, MONITOR_PORT = 4222, 8222
READYZ = ["python3", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:9100/readyz', timeout=2)"]


@contextmanager
def nats(directory: Path, *, fsync: bool) -> Iterator[DockerContainer]:
    """nats-server from the image with JetStream, fsyncing before each acknowledgement or (the server's default)
    every two minutes; ready once it says so."""
    conf = directory / f"nats-{'fsync' if fsync else 'default'}.conf"
    conf.write_text(f"listen: 127.0.0.1:{NATS_PORT}\nhttp: 127.0.0.1:{MONITOR_PORT}\n"
                    f"jetstream {{\n  store_dir: /data/jetstream\n{'  sync_interval: always' if fsync else ''}\n}}\n")
    conf.chmod(0o644)
    server = (DockerContainer(IMAGE, entrypoint=["nats-server"]).with_command(["-c", "/etc/jetcron/nats.conf"])
              .with_volume_mapping(conf, "/etc/jetcron/nats.conf", "ro")
              .waiting_for(LogMessageWaitStrategy("Server is ready").with_startup_timeout(30)))
    with server:
        yield server


def beside(server: DockerContainer, image: str = IMAGE, **kwargs: Any) -> DockerContainer:
    """A jetcron container in the NATS container's network namespace: the server and its monitor port on
    127.0.0.1, as a sidecar sees them, with no network of the tests' own to make and remove."""
    return DockerContainer(image, network_mode=f"container:{server.get_container_id()}", **kwargs).with_envs(
        JETCRON_NATS_URL=f"nats://127.0.0.1:{NATS_PORT}", JETCRON_NATS_MONITOR_URL=f"http://127.0.0.1:{MONITOR_PORT}")


def exited(container: DockerContainer, timeout: float = 60) -> tuple[int, str, str]:
    """Its exit status, stdout and stderr, once it has ended by itself."""
    status = container.get_wrapped_container().wait(timeout=timeout)["StatusCode"]
    out, err = container.get_logs()
    return status, text(out), text(err)


def test_the_image_is_jetcron_of_this_version_run_by_an_unprivileged_user(engine: Engine) -> None:
    config = engine.image(IMAGE).attrs["Config"]
    assert config["Labels"]["org.opencontainers.image.version"] == VERSION, config["Labels"]
    assert (config["User"], config["Entrypoint"]) == ("10001:10001", ["jetcron"]), config
    with DockerContainer(IMAGE).with_command(["--version"]) as cli:
        assert exited(cli) == (0, f"jetcron {VERSION}\n", ""), exited(cli)


def test_a_service_refuses_a_server_that_acknowledges_writes_before_fsync(engine: Engine, tmp_path: Path) -> None:
    with nats(tmp_path, fsync=False) as server, beside(server).with_command(["api"]) as api:
        status, out, err = exited(api)
        assert status == 2, (status, out, err)
        assert "jetcron api: refusing to start: the server acknowledges writes before fsync: set `sync_interval: " \
               "always`" in err, (out, err)


@pytest.mark.timeout(180)
def test_a_service_and_an_agent_in_container_mode_start_on_a_server_that_fsyncs(engine: Engine,
                                                                                 tmp_path: Path) -> None:
    health = engine.health_check(IMAGE)
    assert health[:1] in (["CMD"], ["CMD-SHELL"]), f"the image has no health check: {health}"
    check = ["/bin/sh", "-c", health[1]] if health[0] == "CMD-SHELL" else health[1:]
    ready = ExecWaitStrategy(READYZ).with_startup_timeout(60)
    with nats(tmp_path, fsync=True) as server, beside(server).with_command(["api"]).waiting_for(ready) as api:
        # The image's own health check passes on a ready service (podman runs no health checks without systemd, so
        # the test runs it)
        done = api.exec(check)
        assert done.exit_code == 0, text(done.output)
        # An agent given the engine's socket: the docker CLI in the image answers through it, so the agent advertises
        # the `container` capability (its metrics port apart from the api's: they share one network namespace)
        agent = beside(server, f"{IMAGE}-docker", group_add=[str(engine.socket.stat().st_gid)]).with_command(
            ["agent", "--id", "agent-images"]).with_volume_mapping(engine.socket, "/run/jetcron/engine.sock", "rw")
        with agent.with_envs(DOCKER_HOST="unix:///run/jetcron/engine.sock", JETCRON_METRICS_PORT="9101"):
            listed = until("the agent to advertise `container`",
                            lambda: [a for a in _agents(api) if "container" in a["capabilities"]], 60)
            assert [a["agent_id"] for a in listed] == ["agent-images"], (listed, text(agent.get_wrapped_container()
                                                                                       .logs(tail=40)))
            # and starts its runs through the image's jetcron-launch, not its Python twin
            logs = text(agent.get_wrapped_container().logs())
            ready = next(json.loads(line) for line in logs.splitlines() if '"agent ready"' in line)
            assert ready["launcher"] is True, ready


def _agents(container: DockerContainer) -> list[dict[str, Any]]:
    """`jetcron agents list` run inside a container, as its operator would there."""
    status, (out, err) = container.get_wrapped_container().exec_run(["jetcron", "agents", "list", "-o", "json"],
                                                                    demux=True)
    assert status == 0, (status, out, err)
    found: list[dict[str, Any]] = json.loads(out)
    return found



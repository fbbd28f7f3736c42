"""The container CLI's argv for one attempt (services/jetcron_services/agent/host/container.py): limits, env by name
only, no --rm, and the attempt's GPUs handed to the container as devices."""

from __future__ import annotations

import pytest

from jetcron.core.host.launch_plan import container_name, gpu_args, run_argv
from jetcron_services.agent.host.container import engine_env


def _argv(runtime: str, gpus: list[int] | None = None) -> list[str]:
    return run_argv(runtime, name="jc-r1-1", agent_id="a1", image="alpine:3.20", command=["sh", "-c", "echo $X"],
                    env_names=["X", "JETCRON_RUN_ID"], memory_mb=64, max_pids=100, cpu=0.5, gpus=gpus)


def test_a_run_names_its_limits_its_label_and_its_env_names_never_their_values() -> None:
    assert _argv("/usr/bin/docker") == [
        "/usr/bin/docker", "run", "--name", "jc-r1-1", "--label", "jetcron.agent=a1", "--memory", "64m",
        "--pids-limit", "100", "--cpus", "0.5", "-e", "JETCRON_RUN_ID", "-e", "X", "alpine:3.20", "sh", "-c",
        "echo $X"]


@pytest.mark.parametrize(("runtime", "gpus", "expected"), [
    ("/usr/bin/docker", [], []),
    ("/usr/bin/docker", [2], ["--gpus", '"device=2"']),
    ("/usr/bin/docker", [2, 3], ["--gpus", '"device=2,3"']),
    ("/usr/bin/podman", [0, 5], ["--device", "nvidia.com/gpu=0", "--device", "nvidia.com/gpu=5"]),
])
def test_the_attempts_gpus_become_the_containers_devices(runtime: str, gpus: list[int],
                                                         expected: list[str]) -> None:
    assert gpu_args(runtime, gpus) == expected
    argv = _argv(runtime, gpus)
    assert argv[argv.index("--cpus") + 2:argv.index("-e")] == expected


def test_a_container_name_keeps_only_safe_characters() -> None:
    assert container_name("01J/x y", 2) == "jc-01J_x_y-2"


def test_the_cli_of_a_run_reaches_the_engine_the_agent_reaches(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", "unix:///run/jetcron/engine.sock")
    monkeypatch.setenv("CONTAINER_HOST", "unix:///run/podman/podman.sock")
    monkeypatch.delenv("DOCKER_CONTEXT", raising=False)
    monkeypatch.setenv("HOME", "/root")
    assert engine_env() == {"DOCKER_HOST": "unix:///run/jetcron/engine.sock",
                            "CONTAINER_HOST": "unix:///run/podman/podman.sock"}

"""What an agent advertises: a container runtime only when its engine answers, and how it enforces limits."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from jetcron_services.agent.host.container import detect_runtime
from jetcron_services.agent.host.limits import CGROUP1, CGROUP2, RLIMIT, detect

FAKE_DOCKER = '''#!{python}
"""A stand-in docker CLI: `info` works only while a file named `engine` sits beside it; `run` logs its
argv and its own environment, and runs the command on the host with the -e variables (there is no engine here to
run an image)."""
import json, os, sys
here = os.path.dirname(os.path.abspath(__file__))
args = sys.argv[1:]
with open(os.path.join(here, "calls.log"), "a") as log:
    log.write(" ".join(args) + "\\n")
if args[:1] == ["info"]:
    sys.exit(0 if os.path.exists(os.path.join(here, "engine")) else 1)
if args[:1] == ["run"]:
    with open(os.path.join(here, "env.log"), "a") as log:
        log.write(json.dumps({{"uid": os.getuid(), "groups": os.getgroups(), "env": dict(os.environ)}}) + "\\n")
    rest, env = args[1:], {{"PATH": os.environ.get("PATH", "")}}
    takes_value = {{"--name", "--label", "--memory", "--pids-limit", "--cpus", "-e"}}
    while rest and rest[0].startswith("-"):
        flag = rest.pop(0)
        if flag == "-e":
            env[rest[0]] = os.environ.get(rest[0], "")
        if flag in takes_value:
            rest.pop(0)
    image, command = rest[0], rest[1:]
    env["FAKE_IMAGE"] = image
    os.execvpe(command[0], command, env)
sys.exit(0)
'''


def fake_docker(bin_dir: Path, *, engine: bool) -> Path:
    """Put a fake `docker` in bin_dir; with engine=False its `info` fails, as the real CLI does without a daemon.
    A `podman` beside it fails too: a real podman later on PATH (this machine may have one) must not be found."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    script = bin_dir / "docker"
    script.write_text(FAKE_DOCKER.format(python=sys.executable))
    script.chmod(0o755)
    podman = bin_dir / "podman"
    podman.write_text("#!/bin/sh\nexit 125\n")
    podman.chmod(0o755)
    if engine:
        (bin_dir / "engine").touch()
    return script


@pytest.mark.parametrize(("engine", "expected"), [
    pytest.param(True, "docker", id="engine_answers"),
    pytest.param(False, None, id="cli_without_engine"),
])
def test_a_runtime_counts_only_when_its_engine_answers(tmp_path: Path, engine: bool, expected: str | None) -> None:
    # Given a docker CLI on PATH whose `docker info` succeeds or fails
    script = fake_docker(tmp_path / "bin", engine=engine)

    # When the agent probes for a container runtime on that PATH alone
    found = detect_runtime(path=str(tmp_path / "bin"))

    # Then it is advertised only when the engine answered
    assert found == (str(script) if expected else None)
    assert "info" in (tmp_path / "bin" / "calls.log").read_text()


def test_no_cli_at_all_means_no_runtime(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    assert detect_runtime(path=str(tmp_path / "empty")) is None


def test_limits_fall_back_to_rlimits_without_usable_cgroups(tmp_path: Path) -> None:
    # Given a process whose cgroup paths lead nowhere writable
    cgroup_file = tmp_path / "cgroup"
    cgroup_file.write_text("4:memory:/nowhere\n8:pids:/nowhere\n0::/nowhere\n")
    (tmp_path / "mount").mkdir()

    # Then the agent says it enforces limits with rlimits
    assert detect("t", cgroup_file=cgroup_file, mount=tmp_path / "mount").mechanism == RLIMIT


def test_limits_on_this_host_use_cgroups_where_writable(tmp_path: Path) -> None:
    root = detect(f"probe-{tmp_path.name}")
    try:
        assert root.mechanism in (CGROUP1, CGROUP2, RLIMIT)
        if root.mechanism != RLIMIT:
            assert root.memory is not None and root.memory.is_dir()
            assert root.pids is not None and root.pids.is_dir()
    finally:
        root.close()
        if root.memory is not None:
            assert not root.memory.exists(), "a clean stop removes the agent's own group"

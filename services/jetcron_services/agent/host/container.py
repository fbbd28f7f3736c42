"""Container runs through the docker or podman CLI: only where one is installed and its engine answers."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import subprocess

from jetcron.core.host.launch_plan import LABEL_AGENT

RUNTIMES = ("docker", "podman")


ENGINE_ENV = ("DOCKER_HOST", "DOCKER_TLS_VERIFY", "DOCKER_CERT_PATH", "DOCKER_CONTEXT", "DOCKER_CONFIG",
              "CONTAINER_HOST", "CONTAINER_CONNECTION", "CONTAINERS_CONF")
"""How the agent's own environment tells a CLI which engine to reach (an agent in a container: the host's socket)."""


def engine_env() -> dict[str, str]:
    """The agent's engine settings, for the CLI of each container run: a run's environment is built from nothing,
    and without them the CLI looks for an engine at its default socket. Never passed into the container."""
    return {name: value for name in ENGINE_ENV if (value := os.environ.get(name))}


def cli_env() -> dict[str, str]:
    """The environment of a container run's CLI before the run's variables are added (launch_plan.container_cli_env):
    the agent's own PATH and HOME (its credential helpers and configuration, as for its own `docker rm`) and its
    engine settings."""
    base = {"PATH": os.environ.get("PATH", os.defpath), "HOME": os.environ.get("HOME", "/"), "LANG": "C.UTF-8"}
    return {**base, **engine_env()}


def detect_runtime(path: str | None = None, timeout: float = 10.0) -> str | None:
    """The first of docker, podman on PATH whose `info` succeeds (a CLI without a reachable engine does not
    count: advertising it would send container runs here to fail); its full path, or None."""
    for name in RUNTIMES:
        exe = shutil.which(name, path=path)
        if exe is None:
            continue
        try:
            done = subprocess.run([exe, "info"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL, timeout=timeout, check=False)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if done.returncode == 0:
            return exe
    return None


async def remove(runtime: str, *names: str, timeout: float = 15.0) -> None:
    """`rm -f` the containers: killing the CLI's process group does not stop a container it started."""
    if not names:
        return
    with contextlib.suppress(OSError):
        proc = await asyncio.create_subprocess_exec(runtime, "rm", "-f", *names, stdin=subprocess.DEVNULL,
                                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            await asyncio.wait_for(proc.wait(), timeout)
        except TimeoutError:
            proc.kill()


def remove_leftovers(runtime: str, agent_id: str, timeout: float = 15.0) -> list[str]:
    """At start: containers an earlier life of this agent left running (found by label) are removed."""
    try:
        listed = subprocess.run([runtime, "ps", "-aq", "--filter", f"label={LABEL_AGENT}={agent_id}"],
                                capture_output=True, timeout=timeout, check=False, text=True)
    except (OSError, subprocess.TimeoutExpired):
        return []
    ids = listed.stdout.split()
    if ids:
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):
            subprocess.run([runtime, "rm", "-f", *ids], capture_output=True, timeout=timeout, check=False)
    return ids

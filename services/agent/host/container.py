"""Container runs through the docker or podman CLI: only where one is installed and its engine answers."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import subprocess

RUNTIMES = ("docker", "podman")
LABEL_AGENT = "jetcron.agent"


ENGINE_ENV = ("DOCKER_HOST", "DOCKER_TLS_VERIFY", "DOCKER_CERT_PATH", "DOCKER_CONTEXT", "DOCKER_CONFIG",
              "CONTAINER_HOST", "CONTAINER_CONNECTION", "CONTAINERS_CONF")
"""How the agent's own environment tells a CLI which engine to reach (an agent in a container: the host's socket)."""


def engine_env() -> dict[str, str]:
    """The agent's engine settings, for the CLI of each container run: a run's environment is built from nothing,
    and without them the CLI looks for an engine at its default socket. Never passed into the container."""
    return {name: value for name in ENGINE_ENV if (value := os.environ.get(name))}


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


def runtime_name(runtime: str) -> str:
    """docker or podman, from a full path."""
    return runtime.rsplit("/", 1)[-1]


def container_name(run_id: str, attempt: int) -> str:
    return "jc-" + re.sub(r"[^A-Za-z0-9_.-]", "_", f"{run_id}-{attempt}")[:200]


def gpu_args(runtime: str, gpus: list[int]) -> list[str]:
    """The host GPUs an attempt was given, handed to its container: docker's `--gpus` (the NVIDIA container
    toolkit), podman's CDI devices (`nvidia-ctk cdi generate`). Inside, they are numbered from 0."""
    if not gpus:
        return []
    if runtime_name(runtime) == "podman":
        return [arg for i in gpus for arg in ("--device", f"nvidia.com/gpu={i}")]
    # docker reads --gpus as CSV: a list of devices must be quoted inside the value
    return ["--gpus", '"device=' + ",".join(str(i) for i in gpus) + '"']


def run_argv(runtime: str, *, name: str, agent_id: str, image: str, command: list[str], env_names: list[str],
             memory_mb: int, max_pids: int, cpu: float, gpus: list[int] | None = None) -> list[str]:
    """`docker run` for one attempt. Env values come from the CLI's own environment (`-e NAME`), so they never
    appear in a process listing; the engine enforces the limits (memory, pids, cpu) itself. No `--rm`: the docker
    CLI talking to podman's socket (an agent in a container, its jobs beside it) then exits 0 whatever the
    container's exit code; the agent removes the container once the CLI has exited (`remove`)."""
    argv = [runtime, "run", "--name", name, "--label", f"{LABEL_AGENT}={agent_id}",
            "--memory", f"{memory_mb}m", "--pids-limit", str(max_pids), "--cpus", f"{cpu:g}"]
    argv += gpu_args(runtime, gpus or [])
    for env_name in sorted(env_names):
        argv += ["-e", env_name]
    return [*argv, image, *command]


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

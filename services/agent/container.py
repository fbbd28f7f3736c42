"""Container runs through the docker or podman CLI: only where one is installed and its engine answers."""

from __future__ import annotations

import asyncio
import contextlib
import re
import shutil
import subprocess

RUNTIMES = ("docker", "podman")
LABEL_AGENT = "jetcron.agent"


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


def run_argv(runtime: str, *, name: str, agent_id: str, image: str, command: list[str], env_names: list[str],
             memory_mb: int, max_pids: int, cpu: float) -> list[str]:
    """`docker run` for one attempt. Env values come from the CLI's own environment (`-e NAME`), so they never
    appear in a process listing; the engine enforces the limits (memory, pids, cpu) itself."""
    argv = [runtime, "run", "--rm", "--name", name, "--label", f"{LABEL_AGENT}={agent_id}",
            "--memory", f"{memory_mb}m", "--pids-limit", str(max_pids), "--cpus", f"{cpu:g}"]
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

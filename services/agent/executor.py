"""Run one attempt's argv (never through a shell) in its own process group, with limits and output capture."""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import resource
import signal
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

CHUNK = 64 * 1024
FLUSH_SECONDS = 0.2


@dataclass
class Outcome:
    outcome: str
    """succeeded | failed | timed_out | start_failed | killed"""
    exit_code: int | None
    reason: str = ""


def _child_setup(memory_mb: int | None, cpu_seconds: int | None) -> Callable[[], None]:
    """Runs in the child between fork and exec: die with the agent, apply rlimits."""

    def setup() -> None:
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: the direct child dies with the agent
        if memory_mb is not None:
            limit = memory_mb * 1024 * 1024
            with contextlib.suppress(ValueError, OSError):
                resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        if cpu_seconds is not None:
            with contextlib.suppress(ValueError, OSError):
                resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds + 5))

    return setup


def kill_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


class Execution:
    """One child process: start(), then wait() for its Outcome; stop() ends it (TERM, grace, KILL)."""

    def __init__(self, argv: list[str], env: dict[str, str], *, memory_mb: int | None, timeout: float | None,
                 kill_grace: float, on_output: Callable[[str, bytes], Awaitable[None]]) -> None:
        self.argv = argv
        self.env = env
        self.memory_mb = memory_mb
        self.timeout = timeout
        self.kill_grace = kill_grace
        self.on_output = on_output
        self.proc: asyncio.subprocess.Process | None = None
        self.stop_reason: str | None = None
        self._stopping: asyncio.Task[None] | None = None

    @property
    def pid(self) -> int:
        return self.proc.pid if self.proc else 0

    async def start(self) -> Outcome | None:
        """Spawn; an Outcome if it could not start (missing program, permission), else None."""
        try:
            self.proc = await asyncio.create_subprocess_exec(
                *self.argv, env=self.env, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE, start_new_session=True,
                preexec_fn=_child_setup(self.memory_mb, None),
            )
        except (FileNotFoundError, PermissionError, NotADirectoryError, OSError) as exc:
            return Outcome("start_failed", None, f"could not start {self.argv[0]!r}: {exc.strerror or exc}")
        return None

    async def _pump(self, name: str, stream: asyncio.StreamReader | None) -> None:
        if stream is None:
            return
        while True:
            data = await stream.read(CHUNK)
            if not data:
                return
            await self.on_output(name, data)

    def stop(self, reason: str) -> None:
        """Begin ending the process group: SIGTERM, then SIGKILL after the grace period."""
        if self.proc is None or self._stopping is not None:
            return
        self.stop_reason = reason
        self._stopping = asyncio.ensure_future(self._terminate(self.proc.pid))

    def kill_now(self, reason: str) -> None:
        """Self-fencing: the lease is gone, so the group dies without grace."""
        if self.proc is None:
            return
        self.stop_reason = self.stop_reason or reason
        kill_group(self.proc.pid, signal.SIGKILL)

    async def _terminate(self, pgid: int) -> None:
        kill_group(pgid, signal.SIGTERM)
        await asyncio.sleep(self.kill_grace)
        kill_group(pgid, signal.SIGKILL)

    async def wait(self) -> Outcome:
        assert self.proc is not None
        pumps = asyncio.gather(self._pump("stdout", self.proc.stdout), self._pump("stderr", self.proc.stderr))
        try:
            await asyncio.wait_for(asyncio.shield(self.proc.wait()), timeout=self.timeout)
        except TimeoutError:
            self.stop(f"timed out after {self.timeout:g}s")
            await self.proc.wait()
            self.stop_reason = f"timed out after {self.timeout:g}s"
        # The group may hold the pipes open after the leader exits; don't let a stray grandchild hang us.
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(pumps, timeout=2.0)
        kill_group(self.proc.pid, signal.SIGKILL)
        if self._stopping is not None:
            self._stopping.cancel()
        return self._outcome(self.proc.returncode)

    def _outcome(self, code: int | None) -> Outcome:
        if self.stop_reason is not None and self.stop_reason.startswith("timed out"):
            return Outcome("timed_out", code, self.stop_reason)
        if self.stop_reason is not None:
            return Outcome("killed", code, self.stop_reason)
        if code == 0:
            return Outcome("succeeded", 0)
        if code is not None and code < 0:
            name = signal.Signals(-code).name if -code in signal.Signals._value2member_map_ else str(-code)
            hint = " (out of memory?)" if -code in (signal.SIGKILL, signal.SIGSEGV) else ""
            return Outcome("failed", code, f"killed by {name}{hint}")
        return Outcome("failed", code, f"exit code {code}")

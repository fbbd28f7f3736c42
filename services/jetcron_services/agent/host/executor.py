"""Run one attempt's argv (never through a shell) in its own process group, with limits and output capture."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import subprocess
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from jetcron.core.host.job_view import ChildView
from jetcron_services.agent.host import launch
from jetcron_services.agent.host.limits import RunLimits
from jetcron_services.agent.host.process_group import kill_group
from jetcron_services.agent.host.spares import Spare

CHUNK = 64 * 1024
FLUSH_SECONDS = 0.2
LIMIT_POLL_SECONDS = 0.2


async def _read_no_more(_stream: str, _data: bytes) -> None:
    pass


@dataclass
class Outcome:
    outcome: str
    """succeeded | failed | timed_out | start_failed | killed"""
    exit_code: int | None
    reason: str = ""


class LineGather:
    """What of a stream's bytes can be handed on now: up to its last newline, or everything once `limit` bytes
    wait without one; the rest is held for the next read or flush()."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._held = b""

    @property
    def held(self) -> bool:
        return bool(self._held)

    def add(self, data: bytes) -> bytes:
        gathered = self._held + data
        cut = gathered.rfind(b"\n") + 1
        if len(gathered) - cut >= self.limit:
            cut = len(gathered)
        self._held = gathered[cut:]
        return gathered[:cut]

    def flush(self) -> bytes:
        out, self._held = self._held, b""
        return out


class Execution:
    """One child process: start(), then wait() for its Outcome; stop() ends it (TERM, grace, KILL)."""

    def __init__(self, argv: list[str], env: dict[str, str], *, limits: RunLimits | None, timeout: float | None,
                 kill_grace: float, on_output: Callable[[str, bytes], Awaitable[None]],
                 on_kill: Callable[[], Awaitable[None]] | None = None, user: tuple[int, int] | None = None,
                 spare: Spare | None = None, view: ChildView | None = None, scratch: str | None = None,
                 launcher: str | None = None) -> None:
        self.argv = argv
        self.view = view
        """What the child sees of the host: a private /tmp, its file size limit (jetcron.core.host.job_view); None: the
        agent's view, in the agent's working directory."""
        self.scratch = scratch
        """The attempt's scratch directory on the host: the child's working directory."""
        self.spare = spare
        """A child already in groups of its own, to start the program in instead of spawning (spares.py)."""
        self.launcher = launcher
        """jetcron-launch, which sets the child up in one exec; None: its twin in Python (launch.command)."""
        self.user = user
        """(uid, gid) the child switches to after joining its cgroups; None: the agent's own."""
        self.env = env
        self.limits = limits
        self.on_kill = on_kill
        """Extra teardown when the group is killed (a container outlives its CLI's process group)."""
        self.timeout = timeout
        self.kill_grace = kill_grace
        self.on_output = on_output
        self.proc: asyncio.subprocess.Process | None = None
        self.stop_reason: str | None = None
        self.limit_reason: str | None = None
        self._stopping: asyncio.Task[None] | None = None
        self._teardown: set[asyncio.Task[None]] = set()

    @property
    def pid(self) -> int:
        return self.proc.pid if self.proc else 0

    async def start(self) -> Outcome | None:
        """Spawn; an Outcome if it could not start (missing program, permission), else None."""
        program = launch.resolve(self.argv[0], self.env)
        if program is None:
            if self.spare is not None:  # taken for nothing: end it, or it waits with its groups until the agent stops
                await self.spare.discard()
                self.spare = None
            return Outcome("start_failed", None, f"could not start {self.argv[0]!r}: not found or not executable")
        if self.spare is not None and self.limits is not None and self.limits.memory_mb is not None:
            spare, self.spare = self.spare, None
            cwd = self.view.shown(self.scratch) if self.view is not None and self.scratch is not None else ""
            if await spare.launch([program, *self.argv[1:]], self.env, self.limits.memory_mb, self.user, cwd):
                self.proc, self.limits = spare.proc, spare.limits
                return None
            await spare.discard()
        if self.limits is not None:
            self.limits.create()
        spawn = launch.command([program, *self.argv[1:]], self.env, self.limits, self.user, self.view, self.scratch,
                               self.launcher)
        try:
            # cwd: entered as the agent, before the switch (the job's user may not search the dirs above it)
            self.proc = await asyncio.create_subprocess_exec(
                *spawn.argv, env=spawn.env, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE, start_new_session=True, cwd=self.scratch,
            )
        except (FileNotFoundError, PermissionError, NotADirectoryError, OSError, subprocess.SubprocessError) as exc:
            if self.limits is not None:
                self.limits.remove()
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
            return Outcome("start_failed", None, f"could not start {self.argv[0]!r}: {why}")
        if self.proc.stdin is not None:
            # The program's environment, for the launcher to hand on (launch.command): buffered and closed once
            # written, never waited for here. A child that ended before reading it (a bad option) says why through
            # its exit code and stderr.
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                self.proc.stdin.write(spawn.stdin)
            self.proc.stdin.close()
        return None

    def _kill_group(self, sig: int) -> None:
        assert self.proc is not None
        kill_group(self.proc.pid, sig)
        if sig == signal.SIGKILL and self.on_kill is not None and not self._teardown:
            task = asyncio.ensure_future(self.on_kill())
            self._teardown.add(task)

    async def _watch_limits(self) -> None:
        """A limit that was hit ends the whole group at once, with the limit named as the reason."""
        if self.limits is None or not self.limits.groups:
            return
        while True:
            await asyncio.sleep(LIMIT_POLL_SECONDS)
            if (why := self.limits.exceeded()) is not None:
                self.limit_reason = why
                self._kill_group(signal.SIGKILL)
                return

    async def _pump(self, name: str, stream: asyncio.StreamReader | None) -> None:
        """Hand the stream on in whole lines where it can: a program's stdout and stderr reach one log, and a
        line written in pieces (glibc's error() writes "prog: ", the message and the newline apart) must not be
        cut by a line of the other stream. A partial line waits at most FLUSH_SECONDS (a progress bar, a prompt)
        or until CHUNK bytes have gathered."""
        if stream is None:
            return
        lines = LineGather(CHUNK)
        while True:
            try:
                data = await (asyncio.wait_for(stream.read(CHUNK), FLUSH_SECONDS) if lines.held
                              else stream.read(CHUNK))
            except TimeoutError:
                await self.on_output(name, lines.flush())
                continue
            ready = lines.add(data) if data else lines.flush()
            if ready:
                await self.on_output(name, ready)
            if not data:
                return

    def stop(self, reason: str, grace: float | None = None) -> None:
        """Begin ending the process group: SIGTERM, then SIGKILL after the grace period (`grace` seconds, e.g. a
        preemption's; None: the kill grace)."""
        if self.proc is None or self._stopping is not None:
            return
        self.stop_reason = reason
        self._stopping = asyncio.ensure_future(self._terminate(self.proc.pid,
                                                               self.kill_grace if grace is None else grace))

    def kill_now(self, reason: str) -> None:
        """Self-fencing: the lease is gone, so the group dies without grace."""
        if self.proc is None:
            return
        self.stop_reason = self.stop_reason or reason
        self._kill_group(signal.SIGKILL)

    async def _terminate(self, pgid: int, grace: float) -> None:
        kill_group(pgid, signal.SIGTERM)
        await asyncio.sleep(grace)
        self._kill_group(signal.SIGKILL)

    async def wait(self) -> Outcome:
        assert self.proc is not None
        pumps = asyncio.gather(self._pump("stdout", self.proc.stdout), self._pump("stderr", self.proc.stderr))
        watch = asyncio.ensure_future(self._watch_limits())
        try:
            await asyncio.wait_for(asyncio.shield(self.proc.wait()), timeout=self.timeout)
        except TimeoutError:
            self.stop(f"timed out after {self.timeout:g}s")
            await self.proc.wait()
            self.stop_reason = f"timed out after {self.timeout:g}s"
        finally:
            watch.cancel()
        # The group may hold the pipes open after the leader exits; don't let a stray grandchild hang us.
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(pumps, timeout=2.0)
        # The output is all handed on. Its callback is its attempt's, which holds this execution: let go of it, so
        # that the attempt is freed as it ends, not kept in a cycle until the collector's next full pass.
        self.on_output = _read_no_more
        kill_group(self.proc.pid, signal.SIGKILL)
        if self._stopping is not None:
            self._stopping.cancel()
        if self.limits is not None:
            # The kernel's OOM killer may have ended the child before our poll saw it.
            self.limit_reason = self.limit_reason or self.limits.exceeded()
            await self.limits.remove_soon()
        if self._teardown or (self.on_kill is not None and self.stop_reason is not None):
            if not self._teardown:
                self._teardown.add(asyncio.ensure_future(self.on_kill()))  # type: ignore[misc]
            await asyncio.gather(*self._teardown, return_exceptions=True)
        return self._outcome(self.proc.returncode)

    def _outcome(self, code: int | None) -> Outcome:
        if self.limit_reason is not None:
            return Outcome("failed", code, self.limit_reason)
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

"""A spare child: a process already inside fresh run groups, waiting for a run's program.

Joining a cgroup (a write to `cgroup.procs`) waits in the kernel for an RCU grace period (the cgroup
threadgroup lock is a per-cpu rwsem, and its writer synchronises RCU unless another writer came just before).
On an idle host that is 10 to 20 ms; back to back, under load, it is a fraction of a millisecond. So an idle
agent's quick run spent most of its time joining its groups (docs/benchmarks.md, "Idle latency, hop by hop").

The agent keeps one spare, made off any run's path: the launcher (launch.spare_command: jetcron-launch, or its
twin in Python, with `--spare`) dies with the agent, joins the spare's groups, and where runs get a private /tmp
makes its mount namespace with the spare's scratch (scratch.py, made for it in advance and the agent's until a
run takes it) bound over /tmp and sets the file size bound; then it blocks reading its stdin. A run that starts
takes the spare: its memory limit is written to the groups, the run's user is given the scratch (a chown), and the
user, the working directory, the program's environment and its argv (launch.spare_run) are written to the pipe.
The spare enters the directory (as root, before the switch), switches to the user exactly as a spawned child's
launcher does (no supplementary group, real, effective and saved ids, checked, no capability, the parent-death
signal set again), and execs the program with exactly the run's environment: one exec on the run's path. The pid,
the process group and the groups stay the program's. The environment never goes on a command line, where other
users could read it. A new spare is made once the run's child has ended (refill).

Where runs get rlimits rather than groups, or when no spare is ready (a burst of starts), runs are spawned as
before (launch.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from pathlib import Path

from jetcron_services.agent.host import launch
from jetcron_services.agent.host.limits import CGROUP1, CGROUP2, LimitRoot, RunLimits
from jetcron_services.agent.host.process_group import kill_group
from jetcron_services.agent.host.scratch import Scratches, remove_tree
from jetcron_services.agent.host.strays import StrayGuard


class Spare:
    def __init__(self, proc: asyncio.subprocess.Process, limits: RunLimits, strays: StrayGuard,
                 scratch: Path | None = None) -> None:
        self.proc = proc
        self.limits = limits
        self.strays = strays
        self.scratch = scratch
        """Its scratch directory until a run takes it over (hand_over): removed with the spare if none does."""

    def hand_over(self) -> Path | None:
        """The spare's scratch, now the taking attempt's to own and remove."""
        scratch, self.scratch = self.scratch, None
        return scratch

    @property
    def alive(self) -> bool:
        return self.proc.returncode is None

    async def launch(self, argv: list[str], env: dict[str, str], memory_mb: int,
                     user: tuple[int, int] | None = None, cwd: str = "") -> bool:
        """Give it the run: its memory limit, user (uid, gid; None: the agent's), working directory (empty: the
        agent's), environment and argv. False (and nothing started) if the limit is refused (v1 refuses one below
        what the group holds: the waiting launcher is charged only what it touched after joining, a few hundred KB)
        or the spare is gone; the caller then spawns as before."""
        if not self.alive or self.proc.stdin is None:
            return False
        try:
            self.limits.limit_memory(memory_mb)
            self.proc.stdin.write(launch.spare_run(env, argv, user, cwd))
            await self.proc.stdin.drain()
            self.proc.stdin.close()
        except (OSError, ValueError):
            return False
        return True

    async def discard(self) -> None:
        """End a spare that will not run anything (unused, refused, or at the agent's stop); remove its groups."""
        if self.alive:
            kill_group(self.proc.pid, signal.SIGKILL)
        await self.proc.wait()
        self.strays.remove(self.proc.pid)
        await self.limits.remove_soon()
        if (scratch := self.hand_over()) is not None:
            await asyncio.to_thread(remove_tree, scratch)


class SparePool:
    """One spare, made again each time one is taken."""

    def __init__(self, root: LimitRoot, *, max_pids: int, strays: StrayGuard, agent_id: str,
                 scratches: Scratches | None = None, launcher: str | None = None) -> None:
        self.root = root
        self.launcher = launcher
        """jetcron-launch, which makes the spares (None: its twin in Python)."""
        self.max_pids = max_pids
        self.strays = strays
        self.agent_id = agent_id
        self.scratches = scratches
        """Where spares' scratch directories are made (None: spares have none, runs start in the agent's dir)."""
        self.ready: Spare | None = None
        self._making: asyncio.Task[None] | None = None
        self._made = 0
        self._closed = False
        self._discarding: set[asyncio.Task[None]] = set()

    @staticmethod
    def usable(root: LimitRoot, launcher: str | None = None) -> bool:
        """Spares pay only where runs join groups. Either launcher makes them (`launcher`: jetcron-launch, or None
        for its twin)."""
        return root.mechanism in (CGROUP1, CGROUP2)

    @property
    def private_tmp(self) -> bool:
        """Its spares have a private /tmp: only a run whose view has one may take them."""
        return self.scratches is not None and self.scratches.private_tmp

    def take(self) -> Spare | None:
        """The ready spare, or None (the run is spawned as before)."""
        spare, self.ready = self.ready, None
        if spare is not None and not spare.alive:
            task = asyncio.ensure_future(spare.discard())
            self._discarding.add(task)
            task.add_done_callback(self._discarding.discard)
            return None
        return spare

    def refill(self) -> None:
        """Make a spare in the background, unless one is ready or being made. Called at the agent's start and
        whenever a run's child has ended, not when one is taken: the new spare's join would stall the child that
        just started (a writer waiting for the grace period blocks the exec and the exit of every other process
        meanwhile, which an idle run's child would wait out)."""
        if self._closed or self._making is not None or self.ready is not None:
            return
        self._making = asyncio.ensure_future(self._make())

    async def _make(self) -> None:
        try:
            self._made += 1
            limits = RunLimits(self.root, f"spare-{self._made}", memory_mb=None, max_pids=self.max_pids)
            limits.create()
            if not limits.groups:
                return  # the groups could not be made: runs are spawned as before, and the next take tries again
            scratch, view = None, None
            if self.scratches is not None:
                try:
                    scratch = await self.scratches.make_soon()
                except OSError:
                    limits.remove()
                    return
                view = self.scratches.view(run_as_root=False)
            try:
                # Its agent's id in its environment: a restart finds the spare it left (strays.py)
                proc = await asyncio.create_subprocess_exec(
                    *launch.spare_command(limits, view, None if scratch is None else str(scratch), self.launcher),
                    env={"JETCRON_AGENT_ID": self.agent_id}, stdin=asyncio.subprocess.PIPE,
                    stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, start_new_session=True,
                    cwd=scratch)
            except OSError:
                limits.remove()
                if scratch is not None:
                    remove_tree(scratch)
                return
            self.strays.add(proc.pid)
            spare = Spare(proc, limits, self.strays, scratch)
            if self._closed:
                await spare.discard()
            else:
                self.ready = spare
        finally:
            self._making = None

    async def close(self) -> None:
        """At the agent's stop: end the spare and remove its groups."""
        self._closed = True
        if self._making is not None:
            with contextlib.suppress(Exception):
                await self._making
        spare, self.ready = self.ready, None
        if spare is not None:
            await spare.discard()
        await asyncio.gather(*self._discarding, return_exceptions=True)

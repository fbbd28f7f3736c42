"""A spare child: a process already inside fresh run groups, waiting for a run's program.

Joining a cgroup (a write to `cgroup.procs`) waits in the kernel for an RCU grace period (the cgroup
threadgroup lock is a per-cpu rwsem, and its writer synchronises RCU unless another writer came just before).
On an idle host that is 10 to 20 ms; back to back, under load, it is a fraction of a millisecond. So an idle
agent's quick run spent most of its time joining its groups (docs/benchmarks.md, "Idle latency, hop by hop").

The agent keeps one spare, made off any run's path: `setpriv --pdeathsig KILL` (it dies with the agent), then
a short perl program that joins the spare's groups and blocks reading its stdin. A run that starts takes the
spare: its memory limit is written to the groups, and the job's user, the program's environment and its argv
(NUL-separated) are written to the pipe; perl switches to that user (as `setpriv --reuid --regid` does on the
normal path: real, effective, saved and filesystem ids, checked, after the joins, which need root), replaces
its environment with exactly the run's, points stdin at /dev/null and execs the program itself: one exec on the
run's path. The pid, the process group and the groups stay the program's. The one difference from the normal
path: the user's gid is its only supplementary group (perl cannot pass setgroups an empty list), where `setpriv
--clear-groups` leaves none; the process holds that gid already, so it grants nothing more. Perl, not a shell:
a shell adds variables of its own to the program's environment (bash: SHLVL, PWD) and cannot read NUL-separated
items. The environment never goes on a command line, where other users could read it. A new spare is made once
the run's child has ended (refill).

A spare also has the attempt's scratch directory (scratch.py) made for it in advance, owned by the agent until a
run takes it: where runs get a private /tmp, the spare is made in a mount namespace of its own with that scratch
bound over /tmp and the file size limit set (launch.spare_prefix), so none of that is on the run's path either.
The run's user is given the scratch (a chown) as it takes the spare, and perl enters it (as root, before the
switch) as the program's working directory.

Where perl or setpriv is missing, where runs get rlimits rather than groups, or when no spare is ready (a
burst of starts), runs are spawned as before (launch.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import signal
from functools import cache
from pathlib import Path

from jetcron_services.agent.host import launch
from jetcron_services.agent.host.limits import CGROUP1, CGROUP2, LimitRoot, RunLimits
from jetcron_services.agent.host.process_group import kill_group
from jetcron_services.agent.host.scratch import Scratches, remove_tree
from jetcron_services.agent.host.strays import StrayGuard

# Join each cgroup.procs named in argv; read the uid and gid (empty: no switch), the working directory (empty: stay),
# the count of environment items, the items, then the argv. The directory is entered first, as root (the job's
# user may not search the folders above it). The switch is perl's own id variables, in this order: the groups and
# the effective gid (root is needed for both), the real gid (the saved one follows it), the effective uid, then the
# real uid (the saved one follows); /proc then says whether real, effective, saved and filesystem ids are all the
# job's. Not POSIX::setuid: loading POSIX costs 8 ms of CPU per spare.
WAIT_AND_EXEC = r"""
for my $p (@ARGV) { open(my $f, ">", $p) or exit 125; print {$f} $$; close($f) or exit 125 }
$/ = "\0"; my @a = <STDIN>; chomp @a;
exit 0 unless @a;
open(STDIN, "<", "/dev/null") or exit 125;
my ($uid, $gid, $cwd, $n) = splice(@a, 0, 4);
if (length $cwd) { chdir($cwd) or do { print STDERR "jetcron: could not enter $cwd: $!\n"; exit 125 } }
if (length $uid) {
    $) = "$gid $gid"; $( = $gid; $> = $uid; $< = $uid;
    open(my $s, "<", "/proc/self/status") or exit 125;
    local $/ = "\n"; my %id = map { /^(Uid|Gid):\s+(.*)$/ ? ($1, $2) : () } <$s>;
    if (grep({ $_ != $uid } split(/\s+/, $id{Uid} // "x")) || grep({ $_ != $gid } split(/\s+/, $id{Gid} // "x"))) {
        print STDERR "jetcron: could not switch to uid $uid gid $gid\n"; exit 125;
    }
}
%ENV = map { split(/=/, $_, 2) } splice(@a, 0, $n);
exec { $a[0] } @a or print STDERR "jetcron: could not start $a[0]: $!\n";
exit 127;
"""


@cache
def _perl() -> str | None:
    return shutil.which("perl")


def encode(env: dict[str, str], argv: list[str], user: tuple[int, int] | None = None, cwd: str = "") -> bytes:
    """What the spare reads: the uid and gid to switch to (two empty items: none), the working directory (empty:
    none), the number of environment items, the items (NAME=value), then the argv."""
    ids = ["", ""] if user is None else [str(user[0]), str(user[1])]
    items = [*ids, cwd, str(len(env)), *(f"{k}={v}" for k, v in env.items()), *argv]
    if any("\0" in item for item in items):
        raise ValueError("a NUL byte in the run's environment or argv")
    return b"".join(item.encode() + b"\0" for item in items)


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
        agent's), environment and argv. False (and
        nothing started) if the limit is refused (v1 refuses one below what the group holds: the waiting perl is
        charged only what it touched after joining, about 256 KB) or the spare is gone; the caller then spawns as
        before."""
        if not self.alive or self.proc.stdin is None:
            return False
        try:
            self.limits.limit_memory(memory_mb)
            self.proc.stdin.write(encode(env, argv, user, cwd))
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
        """jetcron-launch: a spare's death signal, namespace and /tmp in one exec before its perl (None: setpriv and
        the tools of launch.spare_prefix)."""
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
        """Spares pay only where runs join groups, and need perl and jetcron-launch or a setpriv with --pdeathsig."""
        return (root.mechanism in (CGROUP1, CGROUP2) and (launcher is not None or launch.setpriv_path() is not None)
                and _perl() is not None)

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
        meanwhile: measured, the child of an idle run took 13 ms instead of 3)."""
        if self._closed or self._making is not None or self.ready is not None:
            return
        self._making = asyncio.ensure_future(self._make())

    async def _make(self) -> None:
        try:
            self._made += 1
            limits = RunLimits(self.root, f"spare-{self._made}", memory_mb=None, max_pids=self.max_pids)
            limits.create()
            perl = _perl()
            if not limits.groups or perl is None:
                return  # the groups could not be made: runs are spawned as before, and the next take tries again
            scratch, view = None, None
            if self.scratches is not None:
                try:
                    scratch = await self.scratches.make_soon()
                except OSError:
                    limits.remove()
                    return
                view = self.scratches.view(run_as_root=False)
            prefix = launch.spare_prefix(view, None if scratch is None else str(scratch), self.launcher)
            if prefix is None:  # no way to tie it to the agent's life here (usable() said so already)
                limits.remove()
                if scratch is not None:
                    remove_tree(scratch)
                return
            try:
                proc = await asyncio.create_subprocess_exec(
                    *prefix, perl, "-e", WAIT_AND_EXEC, "--",
                    *(str(g / "cgroup.procs") for g in limits.groups),
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

"""What a real run's child costs this host before any message is sent: the floor under `true` on 4 agents.

The real-`true` target compares jetcron's runs/s with the machine's bare rate of spawning `true` from asyncio, 8
at a time (`bench.throughput.spawn_rate`). A jetcron run's child is not bare: an agent running as root gives it
what docs/security.md ("A job's view of the host") promises every attempt, and this bench does exactly that work
with the agent's own host code and nothing else (no NATS, no agent, no record), 8 at a time, in the same window as
the bare spawns, so that the ratio says how much of the bare rate is left for the protocol at all:

- `bare`: `true` spawned and reaped (the denominator).
- `launcher`: through `jetcron-launch` doing only its parent-death signal: one static exec more.
- `groups`: the run's cgroups (memory and pids, v1 or v2, `RunLimits`) made with their limits, joined by the
  launcher, the limit counters read after the exit (`exceeded`), the groups removed.
- `contained`: `groups` plus what the bench's agents give each child (root agents, jobs as `nobody`): a scratch
  of its own (mode 0700, owned by the job's user, removed after), a private /tmp bound to it in a mount namespace
  of its own, the file size limit and the switch to the job's user, all in the launcher's one exec.
- `pooled` and `pooled_contained`: the same two with the groups made once, 8 of them, and reused run after run
  (their members killed, their counters read): what an agent keeping its groups, which jetcron's does not, could
  reach at best. Most of `groups`' cost is the kernel making and removing a group, not the join.

Where the host cannot do a variant (not root, no writable cgroups, no launcher built) that variant is left out
and named in `skipped`. The children's CPU per spawn (RUSAGE_CHILDREN) and this process's are reported beside the
rates: the floor is the kernel's work and the child's, not Python's. Each variant also spawns `--idle-runs` one
at a time (`idle_p50_ms`): the least an idle run's child hop can take that way.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import pwd
import resource
import shutil
import statistics
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from bench.common import emit, summary
from jetcron.core.host.job_view import ChildView
from jetcron_services.agent.host.launch import launcher_options, launcher_path
from jetcron_services.agent.host.limits import CGROUP1, CGROUP2, LimitRoot, RunLimits, detect

CONCURRENCY = 8
"""As `bench.throughput.spawn_rate`: the bare rate this is compared with."""
MEMORY_MB = 512
MAX_PIDS = 1024
MAX_FILE_BYTES = 16384 * 1024 * 1024
"""The agent's defaults (docs/settings.md): JETCRON_AGENT_MAX_PIDS, JETCRON_AGENT_MAX_FILE_MB."""

Spawn = Callable[[], Awaitable[None]]


async def _reap(argv: list[str], cwd: str | None = None) -> None:
    proc = await asyncio.create_subprocess_exec(*argv, cwd=cwd)
    if await proc.wait() != 0:
        raise RuntimeError(f"{argv} exited {proc.returncode}")


class Host:
    """The variants this host can run, each one spawn of `true` with what it sets up and takes down."""

    def __init__(self, work: Path) -> None:
        self.work = work
        self.true = shutil.which("true") or "/bin/true"
        self.launcher = launcher_path()
        self.root: LimitRoot = detect(f"child-floor-{os.getpid()}")
        self.user = (pwd.getpwnam("nobody").pw_uid, pwd.getpwnam("nobody").pw_gid) if os.geteuid() == 0 else None
        self.view = ChildView(user=self.user, private_tmp=self.user is not None, own_uid=False,
                              max_file_bytes=MAX_FILE_BYTES)
        self.pool: asyncio.Queue[RunLimits] | None = None

    def variants(self) -> tuple[dict[str, Spawn], dict[str, str]]:
        spawns: dict[str, Spawn] = {"bare": self.bare}
        skipped: dict[str, str] = {}
        if self.launcher is None:
            skipped["launcher"] = "jetcron-launch is not built (make builds it)"
        else:
            spawns["launcher"] = self.launched
        if self.launcher is None or self.root.mechanism not in (CGROUP1, CGROUP2):
            skipped["groups"] = f"no writable cgroups here ({self.root.mechanism}) or no launcher"
        else:
            spawns["groups"] = self.grouped
        if "groups" not in spawns or self.user is None:
            skipped["contained"] = "not root, or no cgroups: the agent could not give a child its view here"
        else:
            spawns["contained"] = self.contained
        if "groups" in spawns:
            spawns["pooled"] = self.pooled
        if "contained" in spawns:
            spawns["pooled_contained"] = self.pooled_contained
        return spawns, skipped

    async def bare(self) -> None:
        await _reap([self.true])

    async def launched(self) -> None:
        assert self.launcher is not None
        await _reap([self.launcher, "--", self.true])

    async def grouped(self) -> None:
        await self._in_fresh_groups(view=None)

    async def contained(self) -> None:
        await self._in_fresh_groups(view=self.view)

    async def pooled(self) -> None:
        await self._in_pooled_groups(view=None)

    async def pooled_contained(self) -> None:
        await self._in_pooled_groups(view=self.view)

    async def _in_fresh_groups(self, view: ChildView | None) -> None:
        limits = self._groups(uuid.uuid4().hex)
        try:
            await self._run(limits, view)
        finally:
            await limits.remove_soon()
        if limits.groups:
            raise RuntimeError(f"the run's cgroups were not removed: {limits.groups}")

    async def _in_pooled_groups(self, view: ChildView | None) -> None:
        if self.pool is None:
            self.pool = asyncio.Queue()
            for i in range(CONCURRENCY):
                self.pool.put_nowait(self._groups(f"pooled-{i}"))
        limits = await self.pool.get()
        try:
            await self._run(limits, view)
            for group in limits.groups:  # what the reuse needs: nothing of the last run left in them
                if (group / "cgroup.procs").read_text().strip():
                    raise RuntimeError(f"{group} still has members")
        finally:
            self.pool.put_nowait(limits)

    def _groups(self, name: str) -> RunLimits:
        limits = RunLimits(self.root, name, memory_mb=MEMORY_MB, max_pids=MAX_PIDS)
        limits.create()
        if not limits.groups:
            raise RuntimeError("the run's cgroups could not be made")
        return limits

    async def _run(self, limits: RunLimits, view: ChildView | None) -> None:
        """`true` in the groups; with a view, in a scratch of its own made for it and removed after."""
        assert self.launcher is not None
        scratch: Path | None = None
        if view is not None:
            assert view.user is not None
            scratch = self.work / uuid.uuid4().hex
            scratch.mkdir(mode=0o700)
            os.chown(scratch, *view.user)
        try:
            user = view.user if view is not None else None
            options = launcher_options(limits, user, view, str(scratch) if scratch is not None else None)
            await _reap([self.launcher, *options, "--", self.true], cwd=str(scratch) if scratch else None)
            if (why := limits.exceeded()) is not None:
                raise RuntimeError(f"`true` hit a limit: {why}")
        finally:
            if scratch is not None:
                shutil.rmtree(scratch)

    def close(self) -> None:
        if self.pool is not None:
            while not self.pool.empty():
                self.pool.get_nowait().remove()
        self.root.close()


async def rate(spawn: Spawn, runs: int) -> tuple[float, float, float]:
    """runs/s 8 at a time; the children's CPU and this process's per spawn, in ms."""
    gate = asyncio.Semaphore(CONCURRENCY)

    async def one() -> None:
        async with gate:
            await spawn()

    children, own = resource.getrusage(resource.RUSAGE_CHILDREN), resource.getrusage(resource.RUSAGE_SELF)
    start = time.perf_counter()
    await asyncio.gather(*(one() for _ in range(runs)))
    elapsed = time.perf_counter() - start
    children2, own2 = resource.getrusage(resource.RUSAGE_CHILDREN), resource.getrusage(resource.RUSAGE_SELF)

    def cpu_ms(a: resource.struct_rusage, b: resource.struct_rusage) -> float:
        return (b.ru_utime + b.ru_stime - a.ru_utime - a.ru_stime) * 1000 / runs

    return runs / elapsed, cpu_ms(children, children2), cpu_ms(own, own2)


async def idle(spawn: Spawn, runs: int) -> list[float]:
    """Milliseconds of each spawn alone, from the first step to the child reaped and everything taken down."""
    took = []
    for _ in range(runs):
        start = time.perf_counter()
        await spawn()
        took.append((time.perf_counter() - start) * 1000)
    return took


@contextmanager
def host() -> Iterator[Host]:
    """This host's variants, their scratches in a folder made for them and removed after."""
    with tempfile.TemporaryDirectory(prefix="jetcron-child-floor-") as tmp:
        work = Path(tmp)
        work.chmod(0o711)  # the job's user reaches its own scratch by path, as under the agent's folders
        made = Host(work)
        try:
            yield made
        finally:
            made.close()


async def contained_rate(runs: int = 2000) -> float | None:
    """The `contained` variant's runs/s (None where this host cannot give a child its view): the child floor
    `bench.throughput --mode true` sets beside its bare spawns."""
    with host() as here:
        spawn = here.variants()[0].get("contained")
        if spawn is None:
            return None
        await rate(spawn, 2 * CONCURRENCY)
        return (await rate(spawn, runs))[0]


async def bench(runs: int, reps: int, idle_runs: int) -> dict[str, object]:
    with host() as here:
        spawns, skipped = here.variants()
        for spawn in spawns.values():  # warm: the first spawns of a variant pay for page cache and groups
            await rate(spawn, 2 * CONCURRENCY)
        rates: dict[str, list[float]] = {name: [] for name in spawns}
        child_cpu: dict[str, list[float]] = {name: [] for name in spawns}
        own_cpu: dict[str, list[float]] = {name: [] for name in spawns}
        alone: dict[str, list[float]] = {name: [] for name in spawns}
        for _ in range(reps):
            for name, spawn in spawns.items():  # in turn within a repetition: each ratio is one window's
                per_s, children, own = await rate(spawn, runs)
                rates[name].append(per_s)
                child_cpu[name].append(children)
                own_cpu[name].append(own)
                alone[name].append(statistics.median(await idle(spawn, idle_runs)))
        mechanism, user = here.root.mechanism, here.user
    return {
        "bench": "child_floor", "runs": runs, "reps": reps, "concurrency": CONCURRENCY,
        "limits": mechanism, "job_user": "nobody" if user else "the bench's own",
        "skipped": skipped,
        "runs_per_s": {name: summary(values) for name, values in rates.items()},
        "ratio_to_bare": {name: summary([r / b for r, b in zip(values, rates["bare"], strict=True)])
                          for name, values in rates.items() if name != "bare"},
        "idle_p50_ms": {name: summary(values) for name, values in alone.items()},
        "child_cpu_ms_per_spawn": {name: round(statistics.median(v), 3) for name, v in child_cpu.items()},
        "own_cpu_ms_per_spawn": {name: round(statistics.median(v), 3) for name, v in own_cpu.items()},
        "method": "python -m bench.child_floor: `true` spawned 8 at a time from asyncio, bare and with the agent's "
                  "own host code setting up what a root agent gives each child (no NATS, no service); the variants "
                  "in turn within each repetition",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--idle-runs", type=int, default=200, help="spawns one at a time, per variant and rep")
    args = parser.parse_args()
    emit(asyncio.run(bench(args.runs, args.reps, args.idle_runs)))


if __name__ == "__main__":
    main()

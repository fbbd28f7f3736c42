"""What each way of starting a run's child costs in CPU: spawned through jetcron-launch or through its fallback (an
agent where the C launcher is not built, or JETCRON_AGENT_LAUNCHER=false), and taken from a spare made either way.

Each run is `true` started with the agent's own host code (`Execution`, `SparePool`, `Scratches`) and nothing
else, one at a time, as a root agent gives it: fresh run cgroups, a scratch of its own owned by the job's user
(`nobody`), a private /tmp bound to it, the file size limit and the switch to that user. Per variant, in turn
within each repetition:

- `child_cpu_ms_per_run`: the CPU of every process the run took (the launcher or its fallback, the spare, `true`),
  RUSAGE_CHILDREN over the runs; for a spare that includes its making, which is off the run's path.
- `spare_made_cpu_ms`: the CPU of a spare made and ended unused (`spare_made_*`): its making alone, so the
  spare's run path is the difference.
- `run_ms_p50`: wall time from the child's start to its end reaped (for a spare, from its taking).

Where the host cannot give a child that view (not root, no writable cgroups, no private /tmp), or the launcher is
not built, the variant is left out and named in `skipped`.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import statistics
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

from bench.common import emit, summary
from jetcron.config import Settings
from jetcron_services.agent.host.confine import JobUser
from jetcron_services.agent.host.executor import Execution, Outcome
from jetcron_services.agent.host.launch import launcher_path
from jetcron_services.agent.host.limits import CGROUP1, CGROUP2, LimitRoot, RunLimits, detect
from jetcron_services.agent.host.scratch import Scratches
from jetcron_services.agent.host.spares import Spare, SparePool
from jetcron_services.agent.host.strays import StrayGuard

NOBODY = JobUser(name="nobody", uid=65534, gid=65534, home="/nonexistent")
MEMORY_MB = 512
MAX_PIDS = 1024
MAX_FILE_MB = 16384
"""The agent's defaults (docs/settings.md)."""
TRUE = "/bin/true"

Run = Callable[[], Awaitable[float]]
"""One run: its wall time in ms (from the child's start, or the spare's taking, to its end)."""


def _waiting_on_a_pipe(pid: int) -> bool:
    """Whether the process sleeps in a pipe's read (its stdin: a spare waiting for its run)."""
    try:
        return "pipe" in Path(f"/proc/{pid}/wchan").read_text()
    except OSError:
        return False


async def _no_output(_stream: str, _data: bytes) -> None:
    pass


class Paths:
    """The variants, each with the agent's scratches and spares for one launcher (None: the fallback)."""

    def __init__(self, work: Path) -> None:
        self.work = work
        self.root: LimitRoot = detect(f"launch-paths-{os.getpid()}")
        self.strays = StrayGuard(work / "agent.pgids", "bench-launch")
        self.scratches: dict[str | None, Scratches] = {}
        self.pools: dict[str | None, SparePool] = {}

    def variants(self) -> tuple[dict[str, Run], dict[str, str]]:
        runs: dict[str, Run] = {}
        skipped: dict[str, str] = {}
        if os.geteuid() != 0 or self.root.mechanism not in (CGROUP1, CGROUP2):
            return runs, {"all": f"not root, or no writable cgroups here ({self.root.mechanism})"}
        built = launcher_path()
        for name, launcher in (("launcher", built), ("fallback", None)):
            if name == "launcher" and launcher is None:
                skipped["launcher"] = "jetcron-launch is not built (make builds it)"
                continue
            settings = Settings(data_dir=str(self.work / name), agent_slots=1, agent_max_file_mb=MAX_FILE_MB,
                                agent_job_uids="")
            scratches, notes = Scratches.setup(settings, f"bench-{name}", NOBODY, launcher)
            if not scratches.private_tmp:
                skipped[name] = f"no private /tmp here: {notes}"
                continue
            self.scratches[launcher] = scratches
            self.pools[launcher] = SparePool(self.root, max_pids=MAX_PIDS, strays=self.strays,
                                             agent_id="bench-launch", scratches=scratches, launcher=launcher)
            runs[f"spawned_{name}"] = self._spawned(launcher)
            runs[f"spare_{name}"] = self._in_spare(launcher)
            runs[f"spare_made_{name}"] = self._spare_unused(launcher)
        return runs, skipped

    def _spawned(self, launcher: str | None) -> Run:
        async def run() -> float:
            return await self._run(launcher, None)
        return run

    def _in_spare(self, launcher: str | None) -> Run:
        async def run() -> float:
            return await self._run(launcher, await self._spare(launcher))
        return run

    def _spare_unused(self, launcher: str | None) -> Run:
        async def run() -> float:
            spare = await self._spare(launcher)
            start = time.perf_counter()
            await spare.discard()
            return (time.perf_counter() - start) * 1000
        return run

    async def _spare(self, launcher: str | None) -> Spare:
        """The pool's next spare once it waits for its run: its making all done, as an agent's is well before."""
        pool = self.pools[launcher]
        pool.refill()
        while pool.ready is None or not _waiting_on_a_pipe(pool.ready.proc.pid):
            await asyncio.sleep(0.001)
        spare = pool.take()
        assert spare is not None
        return spare

    async def _run(self, launcher: str | None, spare: Spare | None) -> float:
        """As an attempt starts its child (child.py): its room (the spare's scratch if it took one), its env."""
        scratches = self.scratches[launcher]
        room = await scratches.open_soon(run_as_root=False, path=spare.hand_over() if spare is not None else None)
        env = {"PATH": "/usr/bin:/bin", **room.view.env(str(room.path), {})}
        start = time.perf_counter()
        execution = Execution([TRUE], env, limits=RunLimits(self.root, f"run-{uuid.uuid4().hex[:8]}",
                                                            memory_mb=MEMORY_MB, max_pids=MAX_PIDS),
                              timeout=20, kill_grace=1, on_output=_no_output, spare=spare, user=room.view.user,
                              view=room.view, scratch=str(room.path), launcher=launcher)
        if (failed := await execution.start()) is not None:
            raise RuntimeError(f"`true` did not start: {failed}")
        outcome = await execution.wait()
        took = (time.perf_counter() - start) * 1000
        if outcome != Outcome("succeeded", 0):
            raise RuntimeError(f"`true` did not succeed: {outcome}")
        if spare is not None and execution.pid != spare.proc.pid:
            raise RuntimeError("the run did not take its spare")
        await scratches.close_soon(room)
        return took

    async def close(self) -> None:
        for pool in self.pools.values():
            await pool.close()
        await self.strays.close()
        self.root.close()


async def measure(run: Run, runs: int) -> tuple[float, float, list[float]]:
    """The children's CPU and this process's per run, in ms, and each run's wall time."""
    children, own = resource.getrusage(resource.RUSAGE_CHILDREN), resource.getrusage(resource.RUSAGE_SELF)
    took = [await run() for _ in range(runs)]
    children2, own2 = resource.getrusage(resource.RUSAGE_CHILDREN), resource.getrusage(resource.RUSAGE_SELF)

    def cpu_ms(a: resource.struct_rusage, b: resource.struct_rusage) -> float:
        return (b.ru_utime + b.ru_stime - a.ru_utime - a.ru_stime) * 1000 / runs

    return cpu_ms(children, children2), cpu_ms(own, own2), took


async def bench(runs: int, reps: int) -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix="jetcron-launch-paths-") as tmp:
        work = Path(tmp)
        work.chmod(0o711)  # the job's user passes through to its scratch, as under an agent's data dir
        paths = Paths(work)
        try:
            variants, skipped = paths.variants()
            for run in variants.values():  # warm: page cache, the interpreter's files
                await measure(run, 3)
            child_cpu: dict[str, list[float]] = {name: [] for name in variants}
            own_cpu: dict[str, list[float]] = {name: [] for name in variants}
            wall: dict[str, list[float]] = {name: [] for name in variants}
            for _ in range(reps):
                for name, run in variants.items():  # in turn within a repetition: one window each
                    children, own, took = await measure(run, runs)
                    child_cpu[name].append(children)
                    own_cpu[name].append(own)
                    wall[name].append(statistics.median(took))
        finally:
            await paths.close()
    return {
        "bench": "launch_paths", "runs": runs, "reps": reps, "limits": paths.root.mechanism, "job_user": "nobody",
        "skipped": skipped,
        "child_cpu_ms_per_run": {name: summary(values) for name, values in child_cpu.items()},
        "own_cpu_ms_per_run": {name: summary(values) for name, values in own_cpu.items()},
        "run_ms_p50": {name: summary(values) for name, values in wall.items()},
        "method": "python -m bench.launch_paths: `true` started one at a time with the agent's host code "
                  "(Execution, SparePool, Scratches) as a root agent starts a run's child, through jetcron-launch "
                  "and through its fallback, spawned and from a spare; the variants in turn within each repetition",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=300, help="runs per variant and repetition")
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    emit(asyncio.run(bench(args.runs, args.reps)))


if __name__ == "__main__":
    main()

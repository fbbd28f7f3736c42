"""Per-run resource limits: one cgroup per run (v2 where delegated, else writable v1 memory and pids
controllers), rlimits otherwise; and, when a limit ended the child, the reason in plain words."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
from dataclasses import dataclass
from pathlib import Path

CGROUP2 = "cgroup2"
CGROUP1 = "cgroup1"
RLIMIT = "rlimit"
# RLIMIT_AS counts address space, not memory in use: interpreters and allocators map far more than
# they touch, so the rlimit fallback allows this many times the job's memory.
RLIMIT_AS_FACTOR = 4


def _own_paths(cgroup_file: Path) -> dict[str, str]:
    """controller (or "" for v2) -> this process's path in that hierarchy, from /proc/self/cgroup."""
    paths: dict[str, str] = {}
    for line in cgroup_file.read_text().splitlines():
        number, controllers, path = line.split(":", 2)
        if number == "0" and controllers == "":
            paths[""] = path
        for c in controllers.split(","):
            if c:
                paths[c] = path
    return paths


def _in_hierarchy(mount: Path, path: str) -> Path:
    """Our group's directory; inside a cgroup namespace the path is relative to the mount itself."""
    full = mount / path.lstrip("/")
    return full if full.is_dir() else mount


def _writable_group(parent: Path, name: str, control: str) -> Path | None:
    """Create (or reuse) parent/name and check that its limit file can be written."""
    group = parent / name
    try:
        group.mkdir(exist_ok=True)
        probe = group / control
        value = probe.read_text()
        probe.write_text(value.strip() or "max")
    except OSError:
        return None
    return group


@dataclass(frozen=True)
class LimitRoot:
    """Where this agent makes its per-run groups, and by which mechanism."""

    mechanism: str
    memory: Path | None = None
    """The agent's group in the memory hierarchy (v1), or its runs group (v2)."""
    pids: Path | None = None
    """The agent's group in the pids hierarchy (v1); the same as `memory` on v2."""

    def close(self) -> None:
        """At a clean stop: remove our run groups and the agent's own group."""
        self.sweep()
        for base in {p for p in (self.memory, self.pids) if p is not None}:
            with contextlib.suppress(OSError):
                base.rmdir()

    def sweep(self) -> list[int]:
        """Kill what an earlier life left in our run groups (exact strays: every task in them), then remove them."""
        killed: list[int] = []
        for base in {p for p in (self.memory, self.pids) if p is not None}:
            try:
                groups = list(base.iterdir())
            except OSError:
                continue  # already gone (removed by an earlier close or by the host): nothing to sweep
            for group in groups:
                if group.is_dir():
                    killed += _kill_members(group)
                    with contextlib.suppress(OSError):
                        group.rmdir()
        return killed


def _v2_root(mount: Path, own: str, scope: str) -> LimitRoot | None:
    """A delegated v2 subtree: move ourselves into a leaf and enable memory and pids for the runs group.

    (The "no internal processes" rule: a group that hands controllers to children may hold no process.)
    """
    for base in (mount, mount / "unified"):
        here = _in_hierarchy(base, own) if (base / "cgroup.controllers").exists() else None
        if here is None or not os.access(here, os.W_OK):
            continue
        try:
            if not {"memory", "pids"} <= set((here / "cgroup.controllers").read_text().split()):
                continue
            agent = here / f"jetcron-agent-{scope}"
            agent.mkdir(exist_ok=True)
            (agent / "cgroup.procs").write_text(str(os.getpid()))
            (here / "cgroup.subtree_control").write_text("+memory +pids")
            runs = here / f"jetcron-runs-{scope}"
            runs.mkdir(exist_ok=True)
            (runs / "cgroup.subtree_control").write_text("+memory +pids")
        except OSError:
            continue
        return LimitRoot(CGROUP2, memory=runs, pids=runs)
    return None


def detect(scope: str, *, cgroup_file: Path = Path("/proc/self/cgroup"),
           mount: Path = Path("/sys/fs/cgroup")) -> LimitRoot:
    """cgroup2 where we have a delegated subtree; cgroup1 where the memory and pids controllers are
    writable (hybrid hosts, where memory, cpu and pids are v1 controllers: docs/decisions-testing.md); rlimit
    otherwise.

    `scope` names this agent's groups; it must be unique per agent on the host (its groups are swept at start).
    """
    try:
        own = _own_paths(cgroup_file)
    except (OSError, ValueError):
        return LimitRoot(RLIMIT)
    if "" in own and (root := _v2_root(mount, own[""], scope)) is not None:
        return root
    if "memory" in own and "pids" in own:
        name = f"jetcron-agent-{scope}"
        memory = _writable_group(_in_hierarchy(mount / "memory", own["memory"]), name, "memory.limit_in_bytes")
        pids = _writable_group(_in_hierarchy(mount / "pids", own["pids"]), name, "pids.max")
        if memory is not None and pids is not None:
            return LimitRoot(CGROUP1, memory=memory, pids=pids)
    return LimitRoot(RLIMIT)


def _kill_members(group: Path) -> list[int]:
    try:
        pids = [int(p) for p in (group / "cgroup.procs").read_text().split()]
    except (OSError, ValueError):
        return []
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    return pids


def _counter(path: Path, name: str) -> int:
    """A "name N" line of a cgroup events file (0 if absent or unreadable)."""
    with contextlib.suppress(OSError):
        for line in path.read_text().splitlines():
            key, _, value = line.partition(" ")
            if key == name:
                return int(value)
    return 0


class RunLimits:
    """The limits of one attempt: create its group(s), put the child in them, say which limit ended it."""

    def __init__(self, root: LimitRoot, name: str, *, memory_mb: int | None, max_pids: int) -> None:
        self.root = root
        self.name = re.sub(r"[^A-Za-z0-9._-]", "_", name)[:200]
        self.memory_mb = memory_mb
        """None: no memory limit yet (a spare's groups, made before its run is known: spares.py)."""
        self.max_pids = max_pids
        self.groups: list[Path] = []

    @property
    def mechanism(self) -> str:
        return self.root.mechanism

    def create(self) -> None:
        """Make the run's groups with their limits; on any error fall back to rlimits for this run."""
        root = self.root
        if root.mechanism == RLIMIT or root.memory is None or root.pids is None:
            return
        memory = root.memory / self.name
        pids = root.pids / self.name
        try:
            for group in dict.fromkeys((memory, pids)):
                group.mkdir(exist_ok=True)
                self.groups.append(group)
            if self.memory_mb is not None:
                self.limit_memory(self.memory_mb)
            (pids / "pids.max").write_text(str(self.max_pids))
        except OSError:
            self.remove()
            self.root = LimitRoot(RLIMIT)

    def limit_memory(self, memory_mb: int) -> None:
        """Write the memory limit of groups already made (OSError if refused: v1 refuses one below what its
        members use)."""
        assert self.root.memory is not None
        memory, limit = self.root.memory / self.name, str(memory_mb * 1024 * 1024)
        if self.root.mechanism == CGROUP2:
            (memory / "memory.max").write_text(limit)
            with contextlib.suppress(OSError):
                (memory / "memory.swap.max").write_text("0")
        else:
            (memory / "memory.limit_in_bytes").write_text(limit)
            with contextlib.suppress(OSError):  # swap accounting may be off
                (memory / "memory.memsw.limit_in_bytes").write_text(limit)
        self.memory_mb = memory_mb

    def exceeded(self) -> str | None:
        """Why a limit ended (or must end) the child: the kernel's OOM kill, or a refused fork."""
        if not self.groups:
            return None
        memory = self.root.memory / self.name if self.root.memory else None
        pids = self.root.pids / self.name if self.root.pids else None
        if memory is not None:
            events = memory / ("memory.events" if self.mechanism == CGROUP2 else "memory.oom_control")
            if _counter(events, "oom_kill") > 0:
                return f"memory limit {self.memory_mb} MB exceeded"
        if pids is not None and _counter(pids / "pids.events", "max") > 0:
            return f"process limit {self.max_pids} reached"
        return None

    def remove(self) -> None:
        """Kill anything left in the groups (the leader is gone), then remove them (a busy one: next sweep)."""
        for group in reversed(self.groups):
            _kill_members(group)
            with contextlib.suppress(OSError):
                group.rmdir()
        self.groups = [g for g in self.groups if g.exists()]

    async def remove_soon(self, tries: int = 20) -> None:
        """remove(), retried while killed members are still being reaped (rmdir answers EBUSY)."""
        for _ in range(tries):
            self.remove()
            if not self.groups:
                return
            await asyncio.sleep(0.05)

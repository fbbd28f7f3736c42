"""How much cpu and memory this agent may hand out: the host's, cut to the cgroup limits of the container (or
systemd slice) it runs in. Inside a container `os.cpu_count()` and the physical memory are the host's; the
agent would advertise a 64-core node while its container may use 2 cores and 4 GiB, and the kernel would
throttle or OOM-kill its jobs."""

from __future__ import annotations

import math
import os
from pathlib import Path

CGROUP = Path("/sys/fs/cgroup")
_UNLIMITED_V1 = 1 << 60
"""cgroup v1 writes a page-rounded 2^63-1 for "no limit"; anything above this is none."""


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def cpu_quota(cpu_max: str | None = None, cfs_quota: str | None = None, cfs_period: str | None = None) -> float | None:
    """Cores a cgroup's CPU quota allows, from v2's cpu.max ("max 100000", "150000 100000") or v1's
    cpu.cfs_quota_us / cpu.cfs_period_us (-1: none); None when there is no quota."""
    if cpu_max:
        quota, _, period = cpu_max.partition(" ")
        if quota != "max" and period:
            return int(quota) / int(period)
        return None
    if cfs_quota and cfs_period and int(cfs_quota) > 0:
        return int(cfs_quota) / int(cfs_period)
    return None


def memory_limit(memory_max: str | None = None, limit_in_bytes: str | None = None) -> int | None:
    """Bytes a cgroup may use, from v2's memory.max ("max") or v1's memory.limit_in_bytes; None when none."""
    if memory_max:
        return None if memory_max == "max" else int(memory_max)
    if limit_in_bytes and int(limit_in_bytes) < _UNLIMITED_V1:
        return int(limit_in_bytes)
    return None


def effective(host_cpus: float, host_memory: int, quota: float | None, limit: int | None) -> tuple[float, int]:
    """The smaller of the host's and the cgroup's, cpu rounded down to a hundredth of a core (never 0)."""
    cpus = host_cpus if quota is None else min(host_cpus, quota)
    return max(0.01, math.floor(cpus * 100) / 100), host_memory if limit is None else min(host_memory, limit)


def own_paths(proc_self_cgroup: str) -> dict[str, str]:
    """The cgroup path of this process per hierarchy, from /proc/self/cgroup: "" for v2's unified one, else each
    v1 controller ("cpu", "memory", ...)."""
    paths: dict[str, str] = {}
    for line in proc_self_cgroup.splitlines():
        _, controllers, path = line.split(":", 2)
        for controller in controllers.split(",") if controllers else [""]:
            paths[controller] = path
    return paths


def _chain(root: Path, path: str) -> list[Path]:
    """The cgroup's directory and every parent up to the hierarchy's root: a limit anywhere above applies. In a
    container with its own cgroup namespace the path is "/" and the root is the container's cgroup."""
    own = root / path.lstrip("/")
    if not own.is_dir():
        return [root]
    chain = [own]
    while chain[-1] != root and root in chain[-1].parents:
        chain.append(chain[-1].parent)
    return chain


def _tightest(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return min(known) if known else None


def probe(root: Path = CGROUP, proc_self_cgroup: Path = Path("/proc/self/cgroup")) -> tuple[float, int]:
    """(cores, memory in MiB) this process may use: its cpuset, the CPU quota and the memory limit of the cgroups
    it sits in (v2 unified, or v1's cpu and memory hierarchies), and the host's memory."""
    try:
        host_cpus = float(len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        host_cpus = float(os.cpu_count() or 1)
    host_memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    paths = own_paths(_read(proc_self_cgroup) or "")
    quotas: list[float | None] = []
    limits: list[float | None] = []
    if (root / "cgroup.controllers").exists():  # v2 unified
        for d in _chain(root, paths.get("", "/")):
            quotas.append(cpu_quota(_read(d / "cpu.max")))
            found = memory_limit(_read(d / "memory.max"))
            limits.append(None if found is None else float(found))
    else:  # v1 (or hybrid: cpu and memory live in v1 hierarchies)
        for d in _chain(root / "cpu", paths.get("cpu", "/")):
            quotas.append(cpu_quota(None, _read(d / "cpu.cfs_quota_us"), _read(d / "cpu.cfs_period_us")))
        for d in _chain(root / "memory", paths.get("memory", "/")):
            found = memory_limit(None, _read(d / "memory.limit_in_bytes"))
            limits.append(None if found is None else float(found))
    limit = _tightest(limits)
    cpus, memory = effective(host_cpus, host_memory, _tightest(quotas), None if limit is None else int(limit))
    return cpus, memory // 2**20

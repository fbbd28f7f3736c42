"""What this host offers: cpu, memory, GPUs (NVML when present), labels, capabilities, limit mechanism."""

from __future__ import annotations

import os
import shutil
import socket
from datetime import datetime

from jetcron.config import Settings
from jetcron.core.models import AgentInfo


def discover_gpus() -> tuple[int, str | None, list[int]]:
    """GPU count, model and indices through NVML; (0, None, []) on hosts without GPUs or without NVML."""
    try:
        import pynvml
    except ImportError:
        return 0, None, []
    try:
        pynvml.nvmlInit()
    except Exception:
        return 0, None, []
    try:
        count = int(pynvml.nvmlDeviceGetCount())
        model = None
        if count:
            name = pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(0))
            model = name.decode() if isinstance(name, bytes) else str(name)
        return count, model, list(range(count))
    finally:
        pynvml.nvmlShutdown()


def limit_mechanism() -> str:
    """cgroup2 only where this process may create child groups; rlimit otherwise (FIELD_NOTES)."""
    try:
        with open("/proc/self/cgroup") as f:
            line = f.read().strip().splitlines()[-1]
        path = "/sys/fs/cgroup" + line.split("::", 1)[1] if line.startswith("0::") else None
        if path and os.path.exists(os.path.join(path, "cgroup.subtree_control")) and os.access(path, os.W_OK):
            controllers = open(os.path.join(path, "cgroup.controllers")).read()  # noqa: SIM115
            if "memory" in controllers and "pids" in controllers:
                return "cgroup2"
    except OSError:
        pass
    return "rlimit"


def parse_labels(text: str) -> dict[str, str]:
    labels: dict[str, str] = {}
    for item in filter(None, (p.strip() for p in text.split(","))):
        key, _, value = item.partition("=")
        labels[key.strip()] = value.strip()
    return labels


def describe(settings: Settings, agent_id: str, started_at: datetime, now: datetime, running: int,
             draining: bool) -> AgentInfo:
    gpus, model, indices = discover_gpus()
    memory = settings.agent_memory_mb or int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**20)
    caps = [c for c in ("docker", "podman") if shutil.which(c)]
    return AgentInfo(
        agent_id=agent_id, host=socket.gethostname(), cpu=settings.agent_cpu or float(os.cpu_count() or 1),
        memory_mb=memory, gpus=gpus, gpu_model=model, gpu_indices=indices,
        labels=parse_labels(settings.agent_labels), capabilities=[*caps, "container"] if caps else [],
        limits=limit_mechanism(), running=running, draining=draining, heartbeat_at=now, started_at=started_at,
    )

"""What this host offers: cpu, memory, GPUs (NVML when present), labels, capabilities, limit mechanism."""

from __future__ import annotations

import contextlib
import hashlib
import os
import socket
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from jetcron.config import Settings
from jetcron.core.errors import Misconfigured
from jetcron.core.host.launch_plan import runtime_name
from jetcron.core.ids import AGENT_ID_RE
from jetcron.core.models import AgentInfo
from jetcron.core.validate import LABEL_RE
from jetcron_services.agent.host import capacity, launch
from jetcron_services.agent.host.container import detect_runtime
from jetcron_services.agent.host.limits import LimitRoot
from jetcron_services.agent.host.limits import detect as detect_limits


def fake_gpus(text: str) -> tuple[int, str | None, list[int]]:
    """TEST ONLY: JETCRON_AGENT_FAKE_GPUS="8:H100" makes the agent advertise 8 H100s it does not have."""
    count, _, model = text.partition(":")
    n = int(count)
    return n, (model or "fake") if n else None, list(range(n))


def discover_gpus() -> tuple[int, str | None, list[int]]:
    """GPU count, model and indices through NVML; (0, None, []) on hosts without GPUs or without NVML."""
    if fake := os.environ.get("JETCRON_AGENT_FAKE_GPUS"):
        return fake_gpus(fake)
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
    except Exception:
        return 0, None, []  # a driver that answers init but not queries: treat the host as GPU-less
    finally:
        with contextlib.suppress(Exception):
            pynvml.nvmlShutdown()


@dataclass(frozen=True)
class HostSetup:
    """What is probed once at agent start: GPUs, a working container runtime, the limit mechanism."""

    gpus: tuple[int, str | None, list[int]]
    runtime: str | None
    """Full path of a docker or podman CLI whose engine answered, or None."""
    limits: LimitRoot
    capacity: tuple[float, int] = (1.0, 1024)
    """Cores and MiB this agent may hand out: the host's cut to its own cgroup's limits (capacity.probe)."""
    launcher: str | None = None
    """jetcron-launch's path where runs start through it (launch.launcher_path), else None: its twin in Python."""

    @classmethod
    def probe(cls, agent_id: str, data_dir: str, use_launcher: bool = True) -> HostSetup:
        # Two agents may share an id on one host only with different data dirs (tests do): the pair is the identity.
        scope = f"{agent_id}-{hashlib.sha256(str(Path(data_dir).resolve()).encode()).hexdigest()[:8]}"
        return cls(gpus=discover_gpus(), runtime=detect_runtime(), limits=detect_limits(scope),
                   capacity=capacity.probe(), launcher=launch.launcher_path() if use_launcher else None)

    @property
    def capabilities(self) -> list[str]:
        return [runtime_name(self.runtime), "container"] if self.runtime else []


def parse_labels(text: str) -> dict[str, str]:
    """JETCRON_AGENT_LABELS (key=value,...); a bad one stops the agent at start, naming it."""
    labels: dict[str, str] = {}
    for item in filter(None, (p.strip() for p in text.split(","))):
        key, _, value = item.partition("=")
        key, value = key.strip(), value.strip()
        if not LABEL_RE.fullmatch(key) or not LABEL_RE.fullmatch(value):
            raise Misconfigured(f"JETCRON_AGENT_LABELS: label {item!r} must be key=value, each 1-63 letters, digits, "
                                "'.', '-' or '_'")
        labels[key] = value
    return labels


def checked_agent_id(agent_id: str) -> str:
    """An agent id names subjects and keys (jc.assign.<id>): no subject metacharacters."""
    if not AGENT_ID_RE.fullmatch(agent_id):
        raise Misconfigured(f"JETCRON_AGENT_ID={agent_id!r}: must be 1-63 letters, digits, '-' or '_', starting "
                            "with a letter or digit")
    return agent_id


def describe(settings: Settings, setup: HostSetup, agent_id: str, started_at: datetime, now: datetime,
             running: int, draining: bool) -> AgentInfo:
    gpus, model, indices = setup.gpus
    cpus, memory = setup.capacity
    return AgentInfo(
        agent_id=agent_id, host=socket.gethostname(), cpu=settings.agent_cpu or cpus,
        memory_mb=settings.agent_memory_mb or memory, gpus=gpus, gpu_model=model, gpu_indices=indices,
        labels=parse_labels(settings.agent_labels), capabilities=setup.capabilities,
        limits=setup.limits.mechanism, running=running, slots=settings.agent_slots, draining=draining,
        heartbeat_at=now, started_at=started_at,
    )

"""Helpers shared by the placement integration tests: start a system with agents of given shapes, read state."""

from __future__ import annotations

import asyncio
from typing import Any

import nats
from harness import Services, run_cli, wait_for

from jetcron.core.placing.capacity import CapacitySummary
from jetcron.sdk.client import Client
from jetcron.wire import subjects as s
from jetcron.wire.codec import decode


async def start(services: Services, agents: dict[str, dict[str, str]], *, placements: int = 1,
                core: tuple[str, ...] = ("api", "trigger", "run_tracker")) -> None:
    """Core services, `placements` placement replicas (placement-1 leads), and agents with their own settings."""
    for name in core:
        services.start(name, name)
    services.start("placement-1", "placement")
    for name, env in agents.items():
        services.start(name, "agent", JETCRON_AGENT_ID=name, **env)
    ready = {"api": "api ready", "run_tracker": "run tracker ready", "trigger": "trigger ready"}
    waits = [services[n].wait_logged(ready[n], 40) for n in core if n in ready]
    waits += [services[n].wait_logged("agent ready", 40) for n in agents]
    waits.append(services["placement-1"].wait_logged("placement leader", 40))
    await asyncio.gather(*waits)
    for i in range(2, placements + 1):
        services.start(f"placement-{i}", "placement")
        await services[f"placement-{i}"].wait_logged("standby until", 40)


async def capacity(url: str) -> CapacitySummary | None:
    nc = await nats.connect(url)
    try:
        kv = await nc.jetstream().key_value(s.BUCKET_PLACEMENT)
        try:
            entry = await kv.get(s.CAPACITY_KEY)
        except Exception:
            return None
        return decode(entry.value or b"", CapacitySummary)
    finally:
        await nc.close()


async def agents_known(url: str, n: int) -> None:
    """Placement published a capacity summary counting n agents (so submit-time checks can see them)."""

    async def known() -> bool:
        summary = await capacity(url)
        return summary is not None and summary.agents == n

    await wait_for(known, 20, what=f"placement to publish a capacity summary with {n} agents")


def job(name: str, *command: str, **spec: Any) -> dict[str, Any]:
    return {"spec": {"name": name, "command": list(command), "schedule": {"kind": "now"}, **spec}}


async def runs_of(client: Client, job_name: str) -> list[dict[str, Any]]:
    return list((await client.call("runs.list", {"job": job_name}))["items"])


async def one_run(client: Client, job_name: str, when: Any, timeout: float = 20.0, what: str = "") -> dict[str, Any]:
    async def check() -> dict[str, Any] | None:
        runs = await runs_of(client, job_name)
        assert len(runs) <= 1, f"{job_name} has {len(runs)} runs"
        return runs[0] if runs and when(runs[0]) else None

    found: dict[str, Any] = await wait_for(check, timeout, what=what or f"the run of {job_name}")
    return found


def cli(url: str, *args: str) -> str:
    """`jetcron --nats URL ARGS...`; its standard output (it must succeed)."""
    out = run_cli(url, *args)
    out.check_returncode()
    return out.stdout

"""This agent's entry in the agents bucket, written every heartbeat: what the host offers, what its attempts leave
free, whether it drains, the reports it still has in flight and its GPUs' health."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

import msgspec

from jetcron.core.errors import JetcronError
from jetcron.telemetry import metrics
from jetcron_services.agent.held import HeldAttempts
from jetcron_services.agent.host.confine import JobUser
from jetcron_services.agent.host.gpu_health import GpuHealth
from jetcron_services.agent.host.offer import HostSetup, describe
from jetcron_services.agent.host.scratch import Scratches
from jetcron_services.agent.ports import HeartbeatPorts
from jetcron_services.agent.reports import ReportWindow


class Heartbeat:
    """Beats until the agent stops (`run`), and once more as it starts to drain."""

    def __init__(self, ctx: HeartbeatPorts, agent_id: str, setup: HostSetup, *, held: HeldAttempts,
                 reports: ReportWindow, job_user: JobUser, scratches: Scratches | None,
                 draining: Callable[[], bool]) -> None:
        self.ctx, self.agent_id, self.setup = ctx, agent_id, setup
        self.held, self.reports, self.job_user, self.scratches = held, reports, job_user, scratches
        self.draining = draining
        """Whether the agent drains (placement sends it nothing more)."""
        self.gpu_health = GpuHealth(ctx, setup.gpus[0])
        self.started_at = ctx.clock.now()

    async def beat(self) -> None:
        """Publish this agent's capacity, free resources and draining flag."""
        info = describe(self.ctx.settings, self.setup, self.agent_id, self.started_at, self.ctx.clock.now(),
                        len(self.held.attempts), self.draining())
        used = self.held.used
        info = msgspec.structs.replace(
            info, pending_reports=self.reports.queued, free_cpu=round(max(0.0, info.cpu - used.cpu), 3),
            free_memory_mb=max(0, info.memory_mb - used.memory_mb), free_gpus=max(0, info.gpus - used.gpus),
            job_user="" if self.ctx.settings.agent_sim else shown_job_user(self.job_user, self.scratches))
        info = self.gpu_health.stamp(info)  # placement clears a suspect GPU host only on a later pass
        try:
            await self.ctx.agents.put(self.agent_id, info)
        except JetcronError:
            metrics.HEARTBEAT_FAILURES.inc()
        metrics.AGENT_FREE_CPU.set(info.free_cpu or 0.0)
        metrics.AGENT_FREE_MEMORY.set((info.free_memory_mb or 0) * 2**20)
        metrics.AGENT_FREE_GPUS.set(info.free_gpus or 0)

    async def run(self) -> None:
        while not self.ctx.stop.is_set():
            await self.beat()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.ctx.stop.wait(), timeout=self.ctx.settings.heartbeat)


def shown_job_user(user: JobUser, scratches: Scratches | None) -> str:
    """AgentInfo.job_user: who this agent's jobs run as."""
    if user.uid is None:
        return "@agent"
    return "@own-uid" if scratches is not None and scratches.uids else user.name

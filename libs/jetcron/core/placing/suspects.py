"""Suspect GPU hosts: a GPU host that went missing gets no GPU work until a later health check passes."""

from __future__ import annotations

from datetime import datetime

from jetcron.core.models import AgentInfo

__all__ = ["Suspects"]


class Suspects:
    """Which agents must not get GPU work, and why; pure bookkeeping over what the agents advertise.

    A host is suspect while either holds:

    - it was lost (missed heartbeats) holding GPUs, and no passing check has run since its last
      heartbeat before the loss (`gpu_health_at` is on the agent's own clock, as is `heartbeat_at`,
      so the two compare without trusting placement's clock);
    - its latest check failed.

    An agent that left cleanly (deleted its key when draining) is forgotten, not suspect.
    """

    def __init__(self) -> None:
        self._lost: dict[str, datetime] = {}
        """Agent -> its last heartbeat before it went missing."""

    def lost(self, info: AgentInfo) -> bool:
        """Record that the agent stopped heartbeating; True if it becomes suspect (it has GPUs)."""
        if info.gpus <= 0:
            return False
        previous = self._lost.get(info.agent_id)
        self._lost[info.agent_id] = info.heartbeat_at if previous is None else min(previous, info.heartbeat_at)
        return True

    def restore(self, agent_id: str, lost_after: datetime) -> None:
        """Take a loss recorded by an earlier placement process (from KV)."""
        self._lost.setdefault(agent_id, lost_after)

    def lost_after(self, agent_id: str) -> datetime | None:
        return self._lost.get(agent_id)

    def forget(self, agent_id: str) -> None:
        self._lost.pop(agent_id, None)

    def check(self, info: AgentInfo) -> str | None:
        """Why the agent must get no GPU work now, or None; a pass after the loss clears the loss for good."""
        if info.gpus <= 0:
            self._lost.pop(info.agent_id, None)
            return None
        if info.gpu_health_ok is False:
            detail = f": {info.gpu_health_detail}" if info.gpu_health_detail else ""
            return f"GPU health check failing{detail}"
        since = self._lost.get(info.agent_id)
        if since is None:
            return None
        if info.gpu_health_ok and info.gpu_health_at is not None and info.gpu_health_at > since:
            del self._lost[info.agent_id]
            return None
        return f"missed heartbeats after {since.isoformat()}; waiting for a passing GPU health check"

    def __contains__(self, agent_id: object) -> bool:
        return agent_id in self._lost

    def items(self) -> list[tuple[str, datetime]]:
        """Every recorded loss: agent and its last heartbeat before it."""
        return sorted(self._lost.items())

"""The bundle every attempt on this agent shares (`AttemptDeps`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from jetcron.core.host.sim import SimExecution
from jetcron_services.agent.host.confine import JobUser
from jetcron_services.agent.host.offer import HostSetup
from jetcron_services.agent.host.scratch import Scratches
from jetcron_services.agent.host.spares import SparePool
from jetcron_services.agent.host.strays import StrayGuard
from jetcron_services.agent.reports import FinishBatches, ReportWindow


@dataclass(frozen=True)
class AttemptDeps:
    """What every attempt on this agent shares: the host's side of running a child, and the reports' window."""

    strays: StrayGuard
    """The agent's process groups and containers, known to its reaper."""
    setup: HostSetup
    reports: ReportWindow = field(default_factory=lambda: ReportWindow(1, hold=0.0))
    """The agent's reports in flight (RunStarted, RunFinished), bounded (reports.py)."""
    user: JobUser | None = None
    """Who jobs run as (None: the agent's own user)."""
    spares: SparePool | None = None
    """Children already in run groups (host/spares.py); None: every run is spawned."""
    scratches: Scratches | None = None
    """Where a child gets its scratch, uid and private /tmp (host/scratch.py); None: it starts in the agent's
    working directory, with the agent's view of the host (tests of the lifecycle alone)."""
    sim: SimExecution = field(default_factory=SimExecution)
    """How long a simulated attempt runs and how it exits (agent_sim only; sim.py)."""
    agent_nonce: Callable[[], str] = lambda: ""
    """The nonce of the agent lease held now ("" while none is): a bound claim is the agent's while it matches."""
    finishes: FinishBatches | None = None
    """Finish reports handed to the trackers directly; None: each goes to the events stream (`report_by` stream)."""

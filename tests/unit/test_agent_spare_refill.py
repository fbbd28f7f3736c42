"""An attempt makes the next spare child only after its finish report went out
(services/jetcron_services/agent/attempt.py).

Making a spare forks the agent on its event loop; done before the report, the report (and with it the run's
`succeeded`) waited behind the fork on every idle run.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any, cast

from opentelemetry.context import Context as TraceContext

from jetcron.bus.lease import Lease, LeaseValue
from jetcron.config import Settings
from jetcron.core.clock import ManualClock
from jetcron.core.models import JobSpec
from jetcron.wire.messages import AssignRun
from jetcron_services.agent.attempt import Attempt
from jetcron_services.agent.attempt_deps import AttemptDeps
from jetcron_services.agent.host.offer import HostSetup
from jetcron_services.agent.host.spares import SparePool
from jetcron_services.agent.host.strays import StrayGuard
from jetcron_services.runtime import Context

T0 = datetime(2026, 12, 31, 23, 50, tzinfo=UTC)


class _Sent:
    def __init__(self) -> None:
        self.sent: list[str] = []

    async def publish(self, subject: str, message: Any, **_: Any) -> int:
        self.sent.append(subject)
        return len(self.sent)


class _Pool:
    """Records what had been published each time a spare was asked for."""

    def __init__(self, js: _Sent) -> None:
        self.js = js
        self.refills: list[list[str]] = []

    def take(self) -> None:
        return None

    def refill(self) -> None:
        self.refills.append(list(self.js.sent))


async def test_the_next_spare_is_made_after_the_finish_report_not_before() -> None:
    js = _Sent()
    pool = _Pool(js)
    ctx = cast(Context, SimpleNamespace(settings=Settings(agent_sim=True), clock=ManualClock(T0), publisher=js))
    cmd = AssignRun(run_id="r1", attempt=1, job="j", agent="a", spec=JobSpec(name="j", command=["true"]),
                    scheduled_at=T0, due_at=T0)
    deps = AttemptDeps(strays=cast(StrayGuard, None), setup=cast(HostSetup, None), spares=cast(SparePool, pool))
    attempt = Attempt(ctx, deps, cmd, Lease(key="k", token=1, value=LeaseValue(holder="a")), dict, TraceContext())
    await asyncio.wait_for(attempt.run(), timeout=5)
    # once, and the finish had gone out by then
    assert pool.refills == [["jc.event.finished.a"]]

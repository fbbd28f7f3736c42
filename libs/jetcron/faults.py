"""Fault points for chaos tests: JETCRON_FAULT=POINT=ACTION[@N],... makes a process misbehave at a named line.

Points: trigger.after_publish (run recorded and handed to placement, cursor not yet moved), placement.after_dispatch
(run assigned and AssignRun published, a PlaceRun held for it not yet acked), agent.after_exit (child exited,
nothing reported), agent.before_release (attempt over, its lease not yet released; slow_point), agent.on_control
(a cancel's control message received, not yet acted on: fail drops it), tracker.after_receive (event decoded, run
record not yet written), placement.dispatch (an AssignRun about to be published), placement.pass (a placement
pass about to start), agent.handoff_answer (a direct hand-off acted on, its answer not yet sent; slow_point),
tracker.report_answer (a report handed over directly and applied, its answer not yet sent; slow_point).
"""

from __future__ import annotations

import asyncio
import os
import signal
import time

from jetcron.core.errors import Unavailable

_points: dict[str, str] = {}
_hits: dict[str, int] = {}


def configure(spec: str) -> None:
    """Take the fault points from a JETCRON_FAULT value (read from the environment at import)."""
    _points.clear()
    _points.update((point, action) for point, _, action in (item.partition("=") for item in spec.split(","))
                   if action)
    _hits.clear()


configure(os.environ.get("JETCRON_FAULT", ""))


def point(name: str) -> None:
    """exit: die at once like kill -9 (no cleanup); stop: SIGSTOP ourselves; sleepN: pause N seconds; fail: raise
    Unavailable, as a write does while its stream elects a leader.

    ACTION@N acts on the Nth time the point is reached (default: the first), so a fault can land mid-load.
    """
    _act(_due(name))


async def slow_point(name: str) -> None:
    """As point(), but sleepN waits without blocking the event loop: one slow step while the process goes on
    with everything else, rather than a stuck process."""
    action = _due(name)
    if action.startswith("sleep"):
        await asyncio.sleep(float(action[5:] or 1))
    else:
        _act(action)


def _act(action: str) -> None:
    if action == "exit":
        os._exit(137)
    if action == "stop":
        os.kill(os.getpid(), signal.SIGSTOP)
    if action.startswith("sleep"):
        time.sleep(float(action[5:] or 1))
    if action == "fail":
        raise Unavailable("fault injected: storage did not answer")


def _due(name: str) -> str:
    """The action configured for this point if this is the hit it acts on, else ''."""
    action = _points.get(name)
    if action is None:
        return ""
    action, _, nth = action.partition("@")
    _hits[name] = hits = _hits.get(name, 0) + 1
    return action if hits == int(nth or 1) else ""

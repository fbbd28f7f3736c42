"""The direct hand-off of an assignment to its agent (`assign_by` direct).

The assignment is already recorded (the `assigned` CAS); what remains is to tell its agent. A core request to
the agent, answered once the agent has stored the attempt's claim, carries it with no AssignRun written: the
claim is then the durable proof the run is on its way, as the consumer's ack of an AssignRun was (the agent
acks one only after the same claim). One the agent does not answer so goes to its stream as before, so the
stream stays the path that redelivers; a duplicate of a hand-off that was taken after all (its answer lost, or
late) is one the agent already knows by its run and attempt.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from jetcron.bus.ports import Rpc
from jetcron.bus.rpc import NoAnswer
from jetcron.core.errors import JetcronError
from jetcron.telemetry import metrics
from jetcron.telemetry.tracing import inject_headers
from jetcron.wire import subjects as s
from jetcron.wire.codec import encode
from jetcron.wire.messages import HANDOFF_TAKEN, AssignRun

QUIET_FOR = 20
"""An agent that let a hand-off go unanswered is sent its assignments by the stream for this many timeouts: a
frozen agent (until its heartbeat entry expires) would cost every pass that assigns to it the whole wait, and an
agent of the earlier protocol (no responder) a round trip per assignment."""


class HandOff:
    def __init__(self, rpc: Rpc, timeout: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.rpc = rpc
        self.timeout = timeout
        self.clock = clock
        self.quiet_until: dict[str, float] = {}
        """Agents sent to the stream straight away, until when (monotonic)."""

    async def hand(self, agent: str, cmd: AssignRun) -> bool:
        """Whether the agent has taken the assignment (or had it already); False: the stream must carry it."""
        now = self.clock()
        quiet = self.quiet_until.get(agent)
        if quiet is not None:
            if quiet > now:
                metrics.child(metrics.HANDOFFS, result="skipped").inc()
                return False
            del self.quiet_until[agent]
        try:
            reply = await self.rpc.request(s.handoff_subject(agent), encode(cmd), timeout=self.timeout,
                                           headers=inject_headers({}) or None)
        except NoAnswer as exc:
            self.quiet_until[agent] = now + self.timeout * QUIET_FOR
            metrics.child(metrics.HANDOFFS, result="unanswered" if exc.responders else "no_responders").inc()
            return False
        except JetcronError:  # the connection is down: the stream's publish retries through the outage
            metrics.child(metrics.HANDOFFS, result="unanswered").inc()
            return False
        taken = reply.data == HANDOFF_TAKEN
        metrics.child(metrics.HANDOFFS, result="taken" if taken else "refused").inc()
        return taken

"""A message handed to its taker directly, with its stream as the fallback: the direct hand-offs of protocol v2.

A core request carries the message with nothing stored; the taker answers `taken` only once what it did with it
is stored (an agent's claim of an assignment, the tracker's write of a finish report), which is when it would have
acked the message on its stream. One not answered so (no responder, a refusal, no answer in time, the connection
down) is published to the stream after all, which stays the path that redelivers; a copy of one that was taken
after all (its answer lost, or late) is one the taker knows already, as it knows a redelivery.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from jetcron.bus.ports import Rpc
from jetcron.bus.rpc import NoAnswer
from jetcron.telemetry import metrics
from jetcron.telemetry.tracing import inject_headers
from jetcron.wire.messages import HANDOFF_TAKEN

QUIET_FOR = 20
"""A taker that let a hand-off go unanswered is skipped (the stream straight away) for this many timeouts: a frozen
agent, until its heartbeat entry expires, would cost every placement pass that assigns to it the whole wait, and
a taker of the earlier protocol (no responder) a round trip per message."""


class Direct:
    def __init__(self, rpc: Rpc, kind: str, timeout: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.rpc = rpc
        self.kind = kind
        """What is handed over (the metric's label): assign, report."""
        self.timeout = timeout
        self.clock = clock
        self.quiet_until: dict[str, float] = {}
        """Takers skipped, until when (monotonic)."""

    async def hand(self, taker: str, subject: str, data: bytes) -> bool:
        """Whether `taker` (on `subject`) took it, or had it already; False: the stream must carry it."""
        now = self.clock()
        quiet = self.quiet_until.get(taker)
        if quiet is not None:
            if quiet > now:
                self._count("skipped")
                return False
            del self.quiet_until[taker]
        try:
            reply = await self.rpc.request(subject, data, timeout=self.timeout, headers=inject_headers({}) or None)
        except NoAnswer as exc:
            self.quiet_until[taker] = now + self.timeout * QUIET_FOR
            self._count("unanswered" if exc.responders else "no_responders")
            return False
        except Exception:  # the connection down or closing: the stream's publish retries through the outage
            self._count("unanswered")
            return False
        taken = reply.data == HANDOFF_TAKEN
        self._count("taken" if taken else "refused")
        return taken

    def _count(self, result: str) -> None:
        metrics.child(metrics.HANDOFFS, kind=self.kind, result=result).inc()

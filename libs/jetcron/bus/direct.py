"""A message handed to its taker directly, with its stream as the fallback: the direct hand-offs of protocol v2.

A core request carries the message with nothing stored; the taker answers `taken` only once what it did with it
is stored (an agent's claim of an assignment, the tracker's write of a finish report), which is when it would have
acked the message on its stream. One not answered so (no responder, a refusal, no answer in time, the connection
down) is published to the stream after all, which stays the path that redelivers; a copy of one that was taken
after all (its answer lost, or late) is one the taker knows already, as it knows a redelivery.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable

from jetcron import faults
from jetcron.bus.ports import Message, Rpc
from jetcron.bus.rpc import NoAnswer
from jetcron.core.lifecycle.handoff import Quiet
from jetcron.telemetry import metrics
from jetcron.telemetry.tracing import inject_headers
from jetcron.wire.messages import HANDOFF_REFUSED, HANDOFF_TAKEN
from jetcron.wire.subjects import HDR_TRACEPARENT


class Direct:
    """The giver's side: ask the taker, say whether it took the message."""

    def __init__(self, rpc: Rpc, kind: str, timeout: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.rpc = rpc
        self.kind = kind
        """What is handed over (the metric's label): assign, report."""
        self.timeout = timeout
        self.clock = clock
        self.quiet = Quiet(timeout)
        """Takers skipped for a while (jetcron.core.lifecycle.handoff)."""

    async def hand(self, taker: str, subject: str, data: bytes, *, traceparent: str = "") -> bool:
        """Whether `taker` (on `subject`) took it, or had it already; False: the stream must carry it."""
        reply = await self.ask(taker, subject, data, traceparent=traceparent)
        if reply is None:
            return False
        taken = reply == HANDOFF_TAKEN
        self.count("taken" if taken else "refused")
        return taken

    async def ask(self, taker: str, subject: str, data: bytes, *, messages: int = 1,
                  traceparent: str = "") -> bytes | None:
        """`taker`'s answer (on `subject`) to `data`, which carries `messages`; None when it was skipped or gave
        none (counted for each message): the stream must carry them. The request continues `traceparent`, or
        else the current trace."""
        now = self.clock()
        if self.quiet.skips(taker, now):
            self.count("skipped", messages)
            return None
        try:
            headers = {HDR_TRACEPARENT: traceparent} if traceparent else inject_headers({}) or None
            reply = await self.rpc.request(subject, data, timeout=self.timeout, headers=headers)
        except NoAnswer as exc:
            self.quiet.unanswered(taker, now)
            self.count("unanswered" if exc.responders else "no_responders", messages)
            return None
        except Exception:  # the connection down or closing: the stream's publish retries through the outage
            self.count("unanswered", messages)
            return None
        return reply.data

    def count(self, result: str, messages: int = 1) -> None:
        """Messages handed over with this result (jetcron_handoffs_total)."""
        metrics.child(metrics.HANDOFFS, kind=self.kind, result=result).inc(messages)


class Taker:
    """The taker's side: each request decided in a task of its own (a subscription waits for one handler before it
    delivers the next, and each decision waits for a write), then answered. `decide` gives the answer; one that
    raises is answered refused. Past `most` in flight a request is refused at once, rather than queued past the
    giver's wait, after which it would be carried both ways."""

    def __init__(self, decide: Callable[[Message], Awaitable[bytes]], *, fault: str, most: int | None = None) -> None:
        self.decide = decide
        self.fault = fault
        """The fault point before each answer (tests: an answer late or lost)."""
        self.most = most
        self._tasks: set[asyncio.Task[None]] = set()

    async def on_request(self, msg: Message) -> None:
        if self.most is not None and len(self._tasks) >= self.most:
            await _answer(msg, HANDOFF_REFUSED)
            return
        self._tasks.add(task := asyncio.create_task(self._answer(msg)))
        task.add_done_callback(self._tasks.discard)

    async def _answer(self, msg: Message) -> None:
        try:
            answer = await self.decide(msg)
        except Exception:  # whatever it was, the stream's way then
            answer = HANDOFF_REFUSED
        with contextlib.suppress(Exception):  # unanswered: the giver uses the stream after its timeout
            await faults.slow_point(self.fault)
            await _answer(msg, answer)


async def _answer(msg: Message, answer: bytes) -> None:
    with contextlib.suppress(Exception):
        await msg.respond(answer)

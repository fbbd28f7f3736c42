"""When a message is handed to its taker directly and when it goes by its stream (the direct hand-offs,
jetcron.bus.direct): pure rules, the clock given."""

from __future__ import annotations

from collections.abc import Sequence

QUIET_FOR = 20
"""A taker that let a hand-off go unanswered is skipped (the stream straight away) for this many timeouts: a frozen
agent, until its heartbeat entry expires, would cost every placement pass that assigns to it the whole wait, and
a taker of the previous release that serves no hand-off subject (no responder) a round trip per message."""

DIRECT_REPORTS_MOST = 16
"""A finish report is handed to the trackers directly only while at most this many of its agent's reports are in
flight (its own included). More in flight means the trackers are behind (reports in flight = rate × the trackers'
answer time), and there the stream does better: it buffers a burst durably and the tracker's consumer takes it in
batches, where requests would wait past their timeout and be sent both ways (docs/decisions-protocol.md)."""


def answer_each(taken: Sequence[bool]) -> bytes:
    """A tracker's answer to finish reports handed over in one request: `1` or `0` per report, in order."""
    return b"".join(b"1" if t else b"0" for t in taken)


def taken_each(reply: bytes | None, n: int) -> list[bool]:
    """Which of `n` finish reports handed over in one request a tracker took (answer_each). Anything else (no
    answer, a refusal, a tracker from before that knows no batches and answers `taken` to what it dropped) takes
    none: the stream carries them all, and a copy of one written after all is dropped there as a duplicate."""
    if reply is None or len(reply) != n or reply.strip(b"01"):
        return [False] * n
    return [c == ord("1") for c in reply]


BATCH_REQUESTS = 2
"""Requests of several finish reports an agent has out at once: the reports that come meanwhile make the next."""


def report_directly(in_flight: int, batch: int = 1) -> bool:
    """Whether a finish report goes to the trackers directly, `in_flight` of its agent's reports (its own
    included) being out or waiting, `batch` (`agent_report_batch`) to a request: always when several go to a
    request; one to a request, only while few are in flight."""
    return batch > 1 or in_flight <= DIRECT_REPORTS_MOST


def report_requests(batch: int) -> int:
    """Requests an agent has out at once, `batch` reports at most to each: a few batches, or one report each for
    as many as may go directly."""
    return BATCH_REQUESTS if batch > 1 else DIRECT_REPORTS_MOST


class Quiet:
    """The takers that let a hand-off go unanswered, each skipped until a time (monotonic seconds)."""

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self.until: dict[str, float] = {}

    def skips(self, taker: str, now: float) -> bool:
        """Whether `taker` is skipped now; one whose quiet is over is forgotten."""
        until = self.until.get(taker)
        if until is None:
            return False
        if until > now:
            return True
        del self.until[taker]
        return False

    def unanswered(self, taker: str, now: float) -> None:
        self.until[taker] = now + self.timeout * QUIET_FOR

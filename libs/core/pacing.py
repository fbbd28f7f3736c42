"""How long a leader leaves its event loop free after a pass: the pure rule, timed by the caller."""

from __future__ import annotations

SLOW_PASS = 0.05
"""Seconds: after a pass whose deciding took longer, the leader waits as long before the next one, so that a long
queue leaves half the loop to the watches, the acks and the lease renewal (a pass over 100,000 waiting runs takes
most of a second, and back-to-back passes held the loop until the leader lease lapsed). Only the deciding counts,
the part that holds the loop: while the pass awaits its writes the loop is free, and a wait as long as those
writes halved the rate of a pass bound by them (with a backlog, runs stood queued while agents ran nothing)."""
PAUSE_MAX = 0.5
"""Seconds: the longest wait after one pass, however long it decided (the next pass must still come soon)."""


def pause_after(deciding: float) -> float:
    """Seconds to wait after a pass that held the loop `deciding` seconds: none after a quick one."""
    return min(deciding, PAUSE_MAX) if deciding > SLOW_PASS else 0.0

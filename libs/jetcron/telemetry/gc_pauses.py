"""Time this process spends in the cycle collector, per generation (a metric, and totals for the stop log).

A staged herd holds tens of thousands of attempts in one agent; each full collection walks every tracked
object, and while it runs nothing else in the process does (leases, reports, starts all wait). Collection
counts come with prometheus-client; their pause time does not.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable

from jetcron.telemetry import metrics

_Callback = Callable[[str, dict[str, int]], None]


class GcPauses:
    """`install()` once per process; `totals()` says seconds paused per generation so far."""

    def __init__(self, clock: Callable[[], float] = time.perf_counter) -> None:
        self._clock = clock
        self._began = 0.0
        self._seconds = [0.0, 0.0, 0.0]
        self._longest = [0.0, 0.0, 0.0]
        self._callback: _Callback | None = None

    def on_gc(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._began = self._clock()
            return
        generation = info.get("generation", 2)
        paused = self._clock() - self._began
        self._seconds[generation] += paused
        self._longest[generation] = max(self._longest[generation], paused)
        metrics.child(metrics.GC_PAUSE, generation=str(generation)).inc(paused)

    def install(self) -> None:
        if self._callback is None:
            self._callback = self.on_gc
            gc.callbacks.append(self._callback)

    def uninstall(self) -> None:
        if self._callback is not None:
            gc.callbacks.remove(self._callback)
            self._callback = None

    def totals(self) -> dict[str, float]:
        return {f"gen{g}": round(s, 3) for g, s in enumerate(self._seconds)}

    def longest(self) -> dict[str, float]:
        """The longest single pause per generation, in seconds: what a run due at that moment waited."""
        return {f"gen{g}": round(s, 4) for g, s in enumerate(self._longest)}

"""How a simulated attempt behaves (agent_sim): how long it "runs" and how it "exits".

Drawn per attempt from a generator seeded by its run id and attempt number, so an attempt behaves alike on any
agent and a bench can say beforehand how each run ends. The default (no time, exit 0) is what agent_sim always
did: scale tests that measure the system's own cost, not the jobs'.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from jetcron.core.errors import Misconfigured

DURATIONS = ("fixed", "uniform", "exp")


@dataclass(frozen=True)
class SimExecution:
    duration: str = "fixed"
    """fixed (a seconds), uniform (between a and b seconds) or exp (exponential with mean a seconds, at most b
    when b > 0: a tail of hour-long runs would outlive any bench)."""
    a: float = 0.0
    b: float = 0.0
    exit_codes: tuple[tuple[int, float], ...] = ((0, 1.0),)
    """Exit codes with their weights."""

    def __post_init__(self) -> None:
        if self.duration not in DURATIONS:
            raise Misconfigured(f"simulated duration {self.duration!r}: one of {', '.join(DURATIONS)}")
        if self.a < 0 or self.b < 0 or (self.duration == "uniform" and self.b < self.a):
            raise Misconfigured(f"simulated duration {self.duration}:{self.a},{self.b}: seconds >= 0, a <= b")
        if not self.exit_codes or any(w < 0 for _, w in self.exit_codes) or sum(w for _, w in self.exit_codes) <= 0:
            raise Misconfigured(f"simulated exit codes {self.exit_codes}: weights >= 0, at least one > 0")

    @classmethod
    def parse(cls, duration: str, exit_codes: str = "0") -> SimExecution:
        """From text: duration `S`, `fixed:S`, `uniform:A,B` or `exp:MEAN[,CAP]`; exit codes `CODE[:WEIGHT],...`
        (e.g. `0:95,1:5`), a weight defaulting to 1."""
        kind, _, params = duration.partition(":") if ":" in duration else ("fixed", "", duration)
        try:
            values = [float(v) for v in params.split(",") if v.strip()] or [0.0]
            codes = tuple((int(code), float(weight or 1)) for code, _, weight in
                          (item.strip().partition(":") for item in exit_codes.split(",") if item.strip()))
        except ValueError as exc:
            raise Misconfigured(f"simulated execution {duration!r} / {exit_codes!r}: {exc}") from None
        if len(values) > 2:
            raise Misconfigured(f"simulated duration {duration!r}: at most two numbers")
        return cls(kind, values[0], values[1] if len(values) > 1 else 0.0, codes)

    def draw(self, run_id: str, attempt: int) -> tuple[float, int]:
        """Seconds this attempt runs and the code it exits with."""
        if self.duration == "fixed" and len(self.exit_codes) == 1:  # nothing to draw: no generator per attempt
            return self.a, self.exit_codes[0][0]
        rng = random.Random(f"{run_id}/{attempt}")
        if self.duration == "fixed":
            seconds = self.a
        elif self.duration == "uniform":
            seconds = rng.uniform(self.a, self.b)
        else:
            seconds = rng.expovariate(1 / self.a) if self.a > 0 else 0.0
            if self.b > 0:
                seconds = min(seconds, self.b)
        codes, weights = zip(*self.exit_codes, strict=True)
        return seconds, rng.choices(codes, weights)[0]

"""Fault points: which hit acts, and whether a pause stalls the whole process or only the step."""

from __future__ import annotations

import pytest

from jetcron import faults


@pytest.fixture
def slept(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, float]]:
    """Every sleep a fault point takes: ('blocking', s) from time.sleep, ('async', s) from asyncio.sleep."""
    calls: list[tuple[str, float]] = []

    async def async_sleep(seconds: float) -> None:
        calls.append(("async", seconds))

    monkeypatch.setattr(faults.time, "sleep", lambda seconds: calls.append(("blocking", seconds)))
    monkeypatch.setattr(faults.asyncio, "sleep", async_sleep)
    monkeypatch.setattr(faults, "_points", {"p.slow": "sleep0.5@2", "p.stuck": "sleep2"})
    monkeypatch.setattr(faults, "_hits", {})
    return calls


async def test_a_slow_point_waits_without_blocking_and_only_on_its_nth_hit(slept: list[tuple[str, float]]) -> None:
    for _ in range(3):
        await faults.slow_point("p.slow")
    await faults.slow_point("p.unset")
    assert slept == [("async", 0.5)]


def test_a_plain_point_blocks_the_process(slept: list[tuple[str, float]]) -> None:
    faults.point("p.stuck")
    faults.point("p.stuck")
    assert slept == [("blocking", 2.0)]

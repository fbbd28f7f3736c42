"""Chaos fixtures (the 3-node cluster is `nats_cluster` / `cluster_services` from tests/conftest.py): a seeded random
source, and a place to print and keep each test's figures."""

from __future__ import annotations

import contextlib
import json
import os
import random
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

FIGURES = Path(__file__).resolve().parents[2] / "build" / "chaos-figures.jsonl"
LIMIT_S = 60


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if Path(item.path).parent == here and Path(item.path).name.startswith("test_chaos_"):
            item.add_marker(pytest.mark.timeout(LIMIT_S + 30))  # the test bounds itself; setup and teardown on top


@pytest.fixture
def seed(request: pytest.FixtureRequest) -> int:
    """JETCRON_CHAOS_SEED replays a run; otherwise a seed derived from the test name (stable, printed)."""
    value = os.environ.get("JETCRON_CHAOS_SEED")
    return int(value) if value else zlib.crc32(request.node.name.encode()) % 1_000_000


@pytest.fixture
def rng(seed: int) -> random.Random:
    return random.Random(seed)


class Figures:
    """What a chaos test measured: printed past output capture, and appended to build/chaos-figures.jsonl."""

    def __init__(self, request: pytest.FixtureRequest, seed: int) -> None:
        self.request = request
        self.values: dict[str, Any] = {"test": request.node.name, "seed": seed}

    def __setitem__(self, key: str, value: Any) -> None:
        self.values[key] = round(value, 3) if isinstance(value, float) else value

    def __getitem__(self, key: str) -> Any:
        return self.values[key]

    def emit(self) -> None:
        self.request.node.user_properties.append(("figures", dict(self.values)))  # the guarantees report
        line = " ".join(f"{k}={v}" for k, v in self.values.items())
        capture = self.request.config.pluginmanager.get_plugin("capturemanager")
        with capture.global_and_fixture_disabled() if capture is not None else contextlib.nullcontext():
            print(f"\nCHAOS {line}", flush=True)
        FIGURES.parent.mkdir(parents=True, exist_ok=True)
        with FIGURES.open("a") as f:
            f.write(json.dumps(self.values) + "\n")


@pytest.fixture
def figures(request: pytest.FixtureRequest, seed: int) -> Iterator[Figures]:
    f = Figures(request, seed)
    yield f
    f.emit()

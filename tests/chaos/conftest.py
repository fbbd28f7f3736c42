"""Chaos fixtures (the 3-node cluster is `nats_cluster` / `cluster_services` from tests/conftest.py): a seeded random
source, and a place to print and keep each test's figures."""

from __future__ import annotations

import os
import random
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from chaos_figures import Figures

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


@pytest.fixture
def figures(request: pytest.FixtureRequest, seed: int) -> Iterator[Figures]:
    f = Figures(request, seed)
    yield f
    f.emit()

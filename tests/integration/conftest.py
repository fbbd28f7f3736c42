"""Integration tests: each must finish within 60 s (the fixtures are shared, in tests/conftest.py)."""

from __future__ import annotations

from pathlib import Path

import pytest


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # A hung integration test must fail on its own, not stall the suite.
    here = Path(__file__).parent
    for item in items:
        if here in Path(item.path).parents:
            item.add_marker(pytest.mark.timeout(60))

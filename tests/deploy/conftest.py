"""The container engine every deploy test shares: one `podman system service` for the session."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from podman_api import Engine, serve


@pytest.fixture(scope="session")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    with serve(tmp_path_factory.mktemp("engine") / "engine.sock") as running:
        yield running

"""Integration fixtures: services as real subprocesses against a real nats-server, and an SDK client."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from harness import FAST_SETTINGS, Services, add_failure_report, clean_env

from jetcron.bus.server import EmbeddedNats
from jetcron.sdk.client import Client


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # A hung integration test must fail on its own, not stall the suite.
    here = Path(__file__).parent
    for item in items:
        if here in Path(item.path).parents:
            item.add_marker(pytest.mark.timeout(60))


def service_env(server: EmbeddedNats, data_dir: Path, **extra: str) -> dict[str, str]:
    return clean_env(JETCRON_NATS_URL=server.url, JETCRON_NATS_MONITOR_URL=server.monitor_url,
                     JETCRON_DATA_DIR=str(data_dir), **FAST_SETTINGS, **extra)


@pytest.fixture
def services(request: pytest.FixtureRequest, nats_server: EmbeddedNats, tmp_path: Path) -> Iterator[Services]:
    """Start services with `services.start(...)` or `await services.start_system()`; all stopped afterwards."""
    log_dir = tmp_path / "logs"
    log_dir.mkdir()
    harness = Services(log_dir, service_env(nats_server, tmp_path / "data"))
    add_failure_report(request, "service logs", harness.report)
    try:
        yield harness
    finally:
        harness.stop_all()


@pytest.fixture
async def client(nats_server: EmbeddedNats) -> AsyncIterator[Client]:
    c = await Client.connect(nats_server.url, timeout=10)
    try:
        yield c
    finally:
        await c.close()

"""Integration tests: each must finish within 120 s (the fixtures are shared, in tests/conftest.py)."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from harness import Services, mint
from rest_support import Rest

from bench.webhook import Receiver
from jetcron.auth.authority import Authority
from jetcron.auth.roles import Role
from jetcron.bus.connect import Identity
from jetcron.sdk.client import Client


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # A hung integration test must fail on its own, not stall the suite. It is a guard against hangs, not a
    # speed check: the heaviest tests (a parked notification's three tries, 1,000 jobs through REST) took 40-60 s
    # with six workers on two busy cores, so the guard is twice that.
    here = Path(__file__).parent
    for item in items:
        if here in Path(item.path).parents and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(120))


async def _admin_client(services: Services, authority: Authority, tmp_path: Path) -> Client:
    return await Client.connect(services.server.url, identity=Identity(
        creds=mint(authority, tmp_path / "admin.creds", Role.ADMIN)))


@pytest.fixture
async def admin(secure_services: Services, authority: Authority, tmp_path: Path) -> AsyncIterator[Client]:
    """A client of the secured system with the admin's credential."""
    client = await _admin_client(secure_services, authority, tmp_path)
    try:
        yield client
    finally:
        await client.close()


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    """A webhook receiver on a loopback port, for notification targets."""
    started = await Receiver().start()
    try:
        yield started
    finally:
        await started.close()


@pytest.fixture
async def rest(secure_services: Services, authority: Authority, tmp_path: Path) -> AsyncIterator[Rest]:
    await secure_services.start_system(agents=1)
    gateway = secure_services.start("gateway", "gateway", JETCRON_HTTP_PORT="0")
    await gateway.wait_logged("gateway ready", 30)
    found = re.search(r"http://127\.0\.0\.1:(\d+)/api/v1", gateway.output())
    assert found, gateway.output()
    admin = await _admin_client(secure_services, authority, tmp_path)
    try:
        yield Rest(f"http://127.0.0.1:{found.group(1)}", admin)
    finally:
        await admin.close()

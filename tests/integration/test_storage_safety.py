"""Refuse unsafe storage: a server that acknowledges before fsync is refused unless the operator opts out."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from harness import Services, services_on, wait_for

from jetcron.bus.server import EmbeddedNats
from jetcron.sdk.client import Client


@pytest.fixture
def unsafe_services(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Services]:
    """Services against a server without `sync_interval: always`."""
    server = EmbeddedNats(tmp_path / "nats", sync_always=False)
    server.start()
    try:
        yield from services_on(request, server, tmp_path)
    finally:
        server.stop()


async def test_a_service_refuses_a_server_that_does_not_fsync_before_ack(unsafe_services: Services) -> None:
    # When a service starts against a server whose jetstream block lacks `sync_interval: always`
    api = unsafe_services.start("api", "api")

    # Then it exits non-zero, saying what to change on the server and how to opt out
    code = await wait_for(lambda: api.proc is not None and api.proc.poll() is not None and [api.proc.returncode],
                          30, what="the api to exit")
    assert code[0] != 0
    out = api.output()
    assert "sync_interval: always" in out
    assert "JETCRON_ALLOW_UNSAFE_STORAGE" in out
    assert "Traceback" not in out, "a refusal is a message, not a crash"


async def test_a_service_accepts_that_server_when_the_operator_opts_out(unsafe_services: Services) -> None:
    # When the operator opts out explicitly
    api = unsafe_services.start("api", "api", JETCRON_ALLOW_UNSAFE_STORAGE="true")

    # Then it starts, warns, and answers
    await api.wait_logged("api ready", 30)
    assert "unsafe storage" in api.output()
    client = await Client.connect(unsafe_services.server.url)
    try:
        assert (await client.call("jobs.list"))["items"] == []
    finally:
        await client.close()

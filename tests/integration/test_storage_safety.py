"""Refuse unsafe storage: a server that acknowledges before fsync is refused unless the operator opts out."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import nats
import pytest
from harness import ServiceProcess, Services, services_on, wait_for

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


DEAD_MONITOR = "http://127.0.0.1:1"
"""A monitor URL nothing listens on: a process in a container that reaches no node's monitor port."""


async def _exit_output(proc: ServiceProcess) -> str:
    await wait_for(lambda: proc.proc is not None and proc.proc.poll() is not None, 30, what=f"{proc.name} to exit")
    assert proc.proc is not None and proc.proc.returncode == 2
    return proc.output()


async def test_a_process_that_reaches_no_monitor_port_trusts_the_check_a_core_service_recorded(
        services: Services) -> None:
    monitor = services.server.monitor_url
    # Given no core service has checked the server yet, an agent that reaches no monitor port refuses, saying how
    early = services.start("agent-0", "agent", JETCRON_AGENT_ID="agent-0", JETCRON_NATS_MONITOR_URL=DEAD_MONITOR)
    out = await _exit_output(early)
    assert "no core service has recorded its check in jc_cluster yet" in out and "Traceback" not in out

    # When the api checks it through the second of two monitor URLs (the first node is down)
    api = services.start("api", "api", JETCRON_NATS_MONITOR_URL=f"{DEAD_MONITOR},{monitor}")
    await api.wait_logged("api ready", 30)
    nc = await nats.connect(services.server.url)
    try:
        entry = await (await nc.jetstream().key_value("jc_cluster")).get("storage.verdict")
    finally:
        await nc.close()
    verdict = json.loads(entry.value or b"{}")
    assert (verdict["sync_always"], verdict["monitor_url"], verdict["checked_by"]) == (True, monitor, "jetcron-api")

    # Then an agent with the NATS URL alone (its monitor port unreachable) joins
    agent = services.start("agent-1", "agent", JETCRON_AGENT_ID="agent-1", JETCRON_NATS_MONITOR_URL=DEAD_MONITOR)
    await agent.wait_logged("agent ready", 30)


async def test_a_recorded_unsafe_verdict_is_refused_too(unsafe_services: Services) -> None:
    # Given a core service that accepted an unsafe server by opting out (and recorded what it found)
    api = unsafe_services.start("api", "api", JETCRON_ALLOW_UNSAFE_STORAGE="true")
    await api.wait_logged("api ready", 30)
    # Then a process that reaches no monitor port and did not opt out is refused on that record
    agent = unsafe_services.start("agent-1", "agent", JETCRON_AGENT_ID="agent-1",
                                  JETCRON_NATS_MONITOR_URL=DEAD_MONITOR)
    out = await _exit_output(agent)
    assert "acknowledges writes before fsync" in out and "Traceback" not in out

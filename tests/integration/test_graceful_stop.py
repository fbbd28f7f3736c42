"""SIGTERM ends every service within its grace period, also when its NATS is gone (it would retry for ever)."""

from __future__ import annotations

import subprocess
import time

import pytest
from harness import Services

from jetcron.bus.server import EmbeddedNats, stop_node

GRACE = 3.0
SLACK = 6.0
"""Beyond the grace: the final drain or close (at most 3 s) and the interpreter's exit."""


@pytest.mark.parametrize("server_alive", [True, False], ids=["nats_up", "nats_gone"])
async def test_every_service_stops_within_its_grace_period(services: Services, nats_server: EmbeddedNats,
                                                           server_alive: bool) -> None:
    # Given the whole system running, with a short stop grace
    await services.start_system(agents=1, JETCRON_STOP_GRACE=str(GRACE))
    if not server_alive:
        # and its NATS killed under it (no goodbye to anyone)
        for node in nats_server.nodes:
            stop_node(node, kill=True)

    # When every service gets SIGTERM at once
    asked = time.monotonic()
    for proc in services.procs.values():
        proc.terminate()

    # Then each one has exited within the grace period and the time to disconnect
    late = []
    for name, proc in services.procs.items():
        try:
            proc.wait_exit(max(0.1, asked + GRACE + SLACK - time.monotonic()))
        except subprocess.TimeoutExpired:
            late.append(name)
    assert late == [], f"still running {GRACE + SLACK:g}s after SIGTERM: {late}"

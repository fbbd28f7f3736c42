"""An agent's credential and the run leases, on the whole system with auth on: it cannot renew, release or
overwrite another agent's lease; a claim it writes on a run placed elsewhere is taken away by the tracker,
counted and named, and the run still ends once, succeeded."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import nats
import pytest
from harness import Services, mint, wait_for
from metrics_support import samples

from jetcron.auth.authority import Authority
from jetcron.auth.roles import Role
from jetcron.bus import lease as lease_store
from jetcron.bus.connect import Identity
from jetcron.bus.registry import Registry
from jetcron.core.errors import JetcronError
from jetcron.sdk.client import Client
from jetcron.wire import subjects as s

pytestmark = pytest.mark.timeout(120)

# The first attempt would run for a minute; a fenced attempt is killed, and the next one ends at once.
JOB = "import os, time; time.sleep(60 if os.environ['JETCRON_ATTEMPT'] == '1' else 0)"


async def test_an_agent_cannot_touch_another_agents_lease_and_its_claim_on_a_run_placed_elsewhere_is_revoked(
        secure_services: Services, authority: Authority, tmp_path: Path) -> None:
    # Given the system with auth on, one agent (agent-1), and a run of a long job holding its lease
    await secure_services.start_system(agents=1, JETCRON_RUN_LEASE_TTL="3")
    admin = await Client.connect(secure_services.server.url, timeout=10,
                                 identity=Identity(creds=mint(authority, tmp_path / "admin.creds", Role.ADMIN)))
    errors: list[str] = []

    async def on_error(exc: Exception) -> None:
        errors.append(str(exc))

    # and a second agent's credential in the hands of someone else (agent-2 runs nothing)
    rogue_creds = mint(authority, tmp_path / "agent-2.creds", Role.AGENT, agent_id="agent-2")
    rogue = await nats.connect(secure_services.server.url, error_cb=on_error, allow_reconnect=False,
                               **Identity(creds=rogue_creds).options())
    try:
        await admin.call("jobs.create", {"spec": {"name": "steady", "command": [sys.executable, "-c", JOB],
                                                  "schedule": {"kind": "now"}}})

        async def running() -> dict[str, Any] | None:
            items = (await admin.call("runs.list", {"job": "steady"}))["items"]
            return items[0] if items and items[0]["state"] == "running" else None

        run = await wait_for(running, 30, what="the run to start")
        leases = lease_store.on_server(rogue.jetstream())
        key = s.run_lease_key(run["run_id"])
        held = await leases.read(key)
        assert held is not None and (held.writer, held.value.holder) == ("agent-1", "agent-1")

        # When agent-2's credential renews agent-1's lease, then releases it
        with pytest.raises(JetcronError):
            await leases.renew(held, 30)
        with pytest.raises(JetcronError):
            await leases.release(held)
        # Then the server refused both writes, naming agent-1's claim, and the lease is agent-1's still
        claim_of_agent_1 = s.lease_subject(key, "agent-1").lower()
        assert any("permissions violation" in e.lower() and claim_of_agent_1 in e.lower() for e in errors), errors
        current = await leases.read(key)
        assert current is not None and current.writer == "agent-1" and current.value.holder == "agent-1"

        # When it writes a claim of its own on the run, for a later attempt (which its name permits)
        claim = await leases.take(key, "agent-2", 30, attempt=run["attempt"] + 5)
        assert claim is not None and claim.writer == "agent-2"

        # Then the tracker takes the claim away, names the writer and counts it
        tracker = secure_services["run_tracker"]
        await tracker.wait_logged("foreign lease claim revoked", 30)
        assert "writer=agent-2" in tracker.output() or '"writer": "agent-2"' in tracker.output()
        registry = await Registry.open(admin.nc.jetstream())
        instance = next(i for i in await registry.instances() if i.service == "run_tracker")
        counted = await samples(instance)
        assert counted[("jetcron_auth_failures_total", frozenset({("kind", "foreign_lease")}))] >= 1.0

        # And the run still ends once, succeeded, on agent-1, in a later attempt (the claim fenced the first)
        async def ended() -> dict[str, Any] | None:
            got: dict[str, Any] = await admin.call("runs.get", {"run_id": run["run_id"]})
            return got if got["state"] in ("succeeded", "failed", "dead") else None

        final = await wait_for(ended, 60, what="the run to end")
        assert (final["state"], final["agent"]) == ("succeeded", "agent-1")
        assert final["attempt"] > run["attempt"]
    finally:
        await rogue.close()
        await admin.close()

"""`jetcron status -o json` against a running system: instances with metrics URLs, leaders, agents, queue, DLQ."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from harness import Services, clean_env, mint, wait_for

from jetcron.auth.authority import Authority
from jetcron.auth.roles import Role
from jetcron.bus.connect import Identity
from jetcron.sdk.client import Client

JETCRON = str(Path(sys.executable).parent / "jetcron")


async def _status(url: str, *args: str, monitor: str = "") -> subprocess.CompletedProcess[str]:
    env = clean_env(**({"JETCRON_NATS_MONITOR_URL": monitor} if monitor else {}))
    return await asyncio.to_thread(subprocess.run, [JETCRON, "--nats", url, "status", *args], capture_output=True,
                                   text=True, timeout=30, env=env)


async def test_status_json_lists_the_whole_system(services: Services, client: Client) -> None:
    # Given a running system that has run one job
    await services.start_system(agents=2)
    await client.call("jobs.create", {"spec": {"name": "seen", "command": ["true"], "schedule": {"kind": "now"}}})

    async def succeeded() -> bool:
        page = await client.call("runs.list", {"job": "seen"})
        return any(r["state"] == "succeeded" for r in page["items"])

    await wait_for(succeeded, 20, what="the run to succeed")

    # When an operator asks for the status as JSON (the tracker leader is elected after its first sync)
    async def settled() -> dict[str, Any] | None:
        done = await _status(services.server.url, "-o", "json", monitor=services.server.monitor_url)
        assert done.returncode == 0, done.stderr
        view: dict[str, Any] = json.loads(done.stdout)
        pinged = [i for i in view["services"] if i["service"] == "agent"]
        return view if view["tracker_leader"] and len(view["agents"]) == 2 and len(pinged) == 2 else None

    # (an instance answers $SRV.PING once it is serving: on a loaded machine an agent may still be starting)
    view = await wait_for(settled, 20, what="status to show the tracker leader and both agents")

    # Then it lists every service instance with its metrics URL, answering $SRV.PING
    by_service: dict[str, list[dict[str, Any]]] = {}
    for instance in view["services"]:
        by_service.setdefault(instance["service"], []).append(instance)
    assert set(by_service) == {"api", "trigger", "placement", "run_tracker", "agent"}
    assert len(by_service["agent"]) == 2
    for instance in view["services"]:
        assert instance["metrics_url"].startswith("http://") and instance["metrics_url"].endswith("/metrics")
        assert (instance["ready"], instance["answers_ping"]) == (True, True), instance
    # the leaders and shard holders, the agents with free capacity, queue depth per priority, recent runs, DLQ
    assert view["placement_leader"].startswith("placement-")
    # (the tracker says when it wins the lease, naming itself as the lease does)
    tracker_log = services["run_tracker"].output()
    assert "tracker leader" in tracker_log and view["tracker_leader"] in tracker_log
    assert set(view["shard_holders"].values()) == {"trigger-1"} and len(view["shard_holders"]) == 16
    assert view["trigger_shards"] == 16
    assert {a["agent_id"] for a in view["agents"]} == {"agent-1", "agent-2"}
    assert all(a["free_cpu"] is not None and a["free_cpu"] > 0 for a in view["agents"])
    assert view["queue_depth"] == {"critical": 0, "high": 0, "normal": 0, "low": 0}
    assert view["runs_last_hour"]["succeeded"] == 1
    assert view["dlq"] == 0
    # and every stream's storage against its limit, the fullest first, the server's store (a monitor port) first
    storage = {u["stream"]: u for u in view["storage"]}
    assert view["storage"][0]["stream"] == "server" and storage["server"]["limit"] == 8 * 2**30
    assert storage["KV_jc_runs"]["used"] > 0 and storage["KV_jc_runs"]["limit"] == 0  # no limit of its own
    assert storage["KV_jc_jobs"]["limit"] == 2**30
    assert set(storage) >= {"JC_EVENTS", "JC_LOGS", "KV_jc_idem"}

    # And the table form fits the same facts on one screen
    table = await _status(services.server.url, monitor=services.server.monitor_url)
    assert table.returncode == 0, table.stderr
    assert "placement leader: placement-" in table.stdout and "dead-lettered: 0" in table.stdout
    assert "storage: server store " in table.stdout and "KV_jc_jobs 0% of 1.0 GiB" in table.stdout
    assert "agents: 2\n" in table.stdout and "agent-1" in table.stdout and "agent-2" in table.stdout

    # And with fewer agents shown than there are, every one is still counted, and the table says where the rest are
    some = await _status(services.server.url, "-o", "json", "--agents", "1")
    assert some.returncode == 0, some.stderr
    view = json.loads(some.stdout)
    assert [a["agent_id"] for a in view["agents"]] == ["agent-1"] and view["agents_total"] == 2
    some = await _status(services.server.url, "--agents", "1")
    assert "agents: 2 (the first 1 by id; `jetcron agents list` pages through every one)" in some.stdout
    assert "agent-1" in some.stdout and "agent-2" not in some.stdout.split("agents: 2")[1]
    refused = await _status(services.server.url, "--agents", "-1")
    assert refused.returncode != 0 and "--agents" in refused.stderr


async def test_status_counts_recent_runs_with_the_admin_credential(secure_services: Services, authority: Authority,
                                                                   tmp_path: Path) -> None:
    # Given a system with auth on (as `jetcron up` runs it) and a handful of runs made in the last hour
    secure_services.start("api", "api")
    await secure_services["api"].wait_logged("api ready", 30)
    admin = mint(authority, tmp_path / "admin.creds", Role.ADMIN)
    url = secure_services.server.url
    client = await Client.connect(url, timeout=10, identity=Identity(creds=admin))
    try:
        await client.call("jobs.create", {"spec": {"name": "seen", "command": ["true"],
                                                   "schedule": {"kind": "cron", "cron": "0 0 1 1 *"}}})
        for n in range(5):
            await client.call("jobs.trigger", {"name": "seen", "key": f"k{n}"})
    finally:
        await client.close()

    # When the operator asks for the status with the admin's credential
    done = await asyncio.to_thread(subprocess.run, [JETCRON, "--nats", url, "--creds", admin, "status", "-o", "json"],
                                   capture_output=True, text=True, timeout=30, env=clean_env())

    # Then every run is counted by its state, and the read is whole (the admin may read what it counts)
    assert done.returncode == 0, done.stderr
    view = json.loads(done.stdout)
    assert view["runs_last_hour"]["scheduled"] == 5, view["runs_last_hour"]
    assert sum(view["runs_last_hour"].values()) == 5 and view["runs_truncated"] is False

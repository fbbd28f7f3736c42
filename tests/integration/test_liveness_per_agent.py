"""Liveness per agent on a real nats-server: a run claim bound to its agent's lease is never renewed while the run
goes on, the agent's death still re-runs it within the lease TTL, agents of both protocols share one cluster, and a
cancel whose control message is lost still stops the child at the agent's next renewal
(services/jetcron_services/agent/liveness.py).
"""

from __future__ import annotations

from pathlib import Path

import nats
from harness import Services, pid_alive, wait_for
from test_runs import now_job, state_is, the_run

from jetcron.bus import lease as lease_store
from jetcron.sdk.client import Client
from jetcron.wire import subjects as s

TTL = "2"
"""JETCRON_RUN_LEASE_TTL here: a run claim of its own is renewed every 0.67 s, an agent's lease as often."""


async def claim_revision(url: str, run_id: str, agent: str) -> int | None:
    """The revision of `agent`'s own claim on the run (its fencing token until it is renewed)."""
    nc = await nats.connect(url)
    try:
        claim = await lease_store.on_server(nc.jetstream()).own(s.run_lease_key(run_id), agent)
        return None if claim is None else claim.token
    finally:
        await nc.close()


def sleeper(name: str, pids: Path) -> dict[str, object]:
    return now_job(name, "sh", "-c", f'echo $$ >> {pids}; if [ "$JETCRON_ATTEMPT" = 1 ]; then sleep 60; fi')


async def test_agents_of_both_protocols_share_a_cluster_and_a_bound_claim_is_never_renewed_until_its_agent_dies(
        services: Services, client: Client, tmp_path: Path) -> None:
    # Given a v2 agent (liveness per agent) and a v1 one (each run renews its own claim), one slot each
    await services.start_system(agents=0, JETCRON_RUN_LEASE_TTL=TTL)
    for name, liveness in (("agent-v2", "agent"), ("agent-v1", "run")):
        services.start(name, "agent", JETCRON_AGENT_ID=name, JETCRON_LIVENESS=liveness, JETCRON_AGENT_SLOTS="1",
                       JETCRON_RUN_LEASE_TTL=TTL)
        await services[name].wait_logged("agent ready", 30)
    # And one long run on each
    pids = tmp_path / "pids.txt"
    for job in ("first", "second"):
        await client.call("jobs.create", sleeper(job, pids))
    runs = {job: await the_run(client, job, when=state_is("running"), what=f"{job} to run")
            for job in ("first", "second")}
    assert {r["agent"] for r in runs.values()} == {"agent-v2", "agent-v1"}
    by_agent = {r["agent"]: r for r in runs.values()}
    # (each claim is written before its start report: a running run has one)
    first = {agent: await claim_revision(services.server.url, r["run_id"], agent) for agent, r in by_agent.items()}
    assert None not in first.values(), first

    # When both have run for more than three of the v1 claim's renewal periods
    v1 = by_agent["agent-v1"]
    await wait_for(lambda: _renewed(services.server.url, v1["run_id"], "agent-v1", first["agent-v1"] or 0, 3), 10,
                   what="the v1 claim to be renewed three times")

    # Then the v2 run's claim is still the write that granted it, never renewed
    v2 = by_agent["agent-v2"]
    assert await claim_revision(services.server.url, v2["run_id"], "agent-v2") == first["agent-v2"]

    # When both agents are killed with SIGKILL and a third (v2) agent joins
    services["agent-v2"].kill9()
    services["agent-v1"].kill9()
    services.start("agent-3", "agent", JETCRON_AGENT_ID="agent-3", JETCRON_RUN_LEASE_TTL=TTL)

    # Then each run is lost once its liveness lapsed (the v2 one by its agent's lease) and runs again on agent-3
    for job, run in runs.items():
        again = await the_run(client, job, when=state_is("succeeded", "failed", "dead"), timeout=30,
                              what=f"{job} to run again")
        assert (again["state"], again["attempt"], again["agent"]) == ("succeeded", 2, "agent-3")
        assert [(a["attempt"], a["agent"], a["outcome"]) for a in again["history"]] == [
            (1, run["agent"], "lost"), (2, "agent-3", "succeeded")]
        assert "lease expired" in again["history"][0]["reason"]


async def _renewed(url: str, run_id: str, agent: str, granted: int, times: int) -> bool:
    found = await claim_revision(url, run_id, agent)
    # Each renewal is a write to the lease bucket: other writes land in between, so a count by revision would be
    # loose; the claim's revision moving on at all is what a bound claim never does.
    return found is not None and found > granted + times


async def test_a_cancel_whose_control_message_is_lost_stops_the_child_at_the_agents_next_renewal(
        services: Services, client: Client, tmp_path: Path) -> None:
    # Given a v2 agent that drops its first control message, running a long job
    await services.start_system(agents=0, JETCRON_RUN_LEASE_TTL=TTL)
    services.start("agent-1", "agent", JETCRON_AGENT_ID="agent-1", JETCRON_RUN_LEASE_TTL=TTL,
                   JETCRON_FAULT="agent.on_control=fail")
    await services["agent-1"].wait_logged("agent ready", 30)
    pids = tmp_path / "pids.txt"
    await client.call("jobs.create", now_job("victim", "sh", "-c", f"echo $$ > {pids}; exec sleep 60"))
    run = await the_run(client, "victim", when=lambda r: r["state"] == "running" and pids.exists()
                        and pids.read_text().strip() != "", what="the job to run")
    child = int(pids.read_text())
    # (its claim written before its start report said it runs)
    assert await claim_revision(services.server.url, run["run_id"], "agent-1") is not None

    # When it is cancelled (the record moves to cancelled; the control message is lost)
    cancelled = await client.call("runs.cancel", {"run_id": run["run_id"], "reason": "not needed"})
    assert cancelled["state"] == "cancelled"

    # Then the stop notice on the agent's lease reaches its next renewal (every 0.67 s) and the child is stopped
    await wait_for(lambda: not pid_alive(child), 10, what=f"the cancelled child {child} to be stopped")
    await services["agent-1"].wait_logged("attempt fenced", 5)
    fenced = [line for line in services["agent-1"].output().splitlines() if "attempt fenced" in line]
    assert len(fenced) == 1 and "not needed" in fenced[0], fenced
    # And the run stays cancelled
    assert (await client.call("runs.get", {"run_id": run["run_id"]}))["state"] == "cancelled"

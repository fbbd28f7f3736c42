"""Liveness per agent on a real nats-server: a run claim bound to its agent's lease is never renewed while the run
goes on, and the agent's death still re-runs it within the lease TTL; a claim an agent of the previous release renews
itself (no agent lease bound) is judged by its own TTL; and a cancel whose control message is lost still stops the
child at the agent's next renewal (services/jetcron_services/agent/liveness.py).
"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import nats
from harness import Services, pid_alive, wait_for
from nats.js import JetStreamContext
from test_runs import now_job, state_is, the_run

from jetcron.bus import lease as lease_store
from jetcron.core.lifecycle.run_state import RunEvent
from jetcron.core.lifecycle.runs import Change, apply
from jetcron.core.models import Run
from jetcron.sdk.client import Client
from jetcron.wire import subjects as s
from jetcron.wire.codec import decode, encode
from jetcron.wire.messages import RunStarted

TTL = "2"
"""JETCRON_RUN_LEASE_TTL here: an agent's lease is renewed every 0.67 s, as a run claim of its own is."""


async def claim_revision(url: str, run_id: str, agent: str) -> int | None:
    """The revision of `agent`'s own claim on the run (its fencing token until it is renewed)."""
    return await own_revision(url, s.run_lease_key(run_id), agent)


async def own_revision(url: str, key: str, writer: str) -> int | None:
    """The revision of `writer`'s own claim on a lease key."""
    nc = await nats.connect(url)
    try:
        claim = await lease_store.on_server(nc.jetstream()).own(key, writer)
        return None if claim is None else claim.token
    finally:
        await nc.close()


def sleeper(name: str, pids: Path) -> dict[str, object]:
    return now_job(name, "sh", "-c", f'echo $$ >> {pids}; if [ "$JETCRON_ATTEMPT" = 1 ]; then sleep 60; fi')


async def test_a_bound_claim_is_never_renewed_until_its_agent_dies_and_its_run_then_runs_again(
        services: Services, client: Client, tmp_path: Path) -> None:
    # Given an agent with one slot, running one long run
    await services.start_system(agents=0, JETCRON_RUN_LEASE_TTL=TTL)
    services.start("agent-1", "agent", JETCRON_AGENT_ID="agent-1", JETCRON_AGENT_SLOTS="1", JETCRON_RUN_LEASE_TTL=TTL)
    await services["agent-1"].wait_logged("agent ready", 30)
    await client.call("jobs.create", sleeper("long", tmp_path / "pids.txt"))
    run = await the_run(client, "long", when=state_is("running"), what="the run to run")
    # (its claim is written before its start report: a running run has one)
    first = await claim_revision(services.server.url, run["run_id"], "agent-1")
    assert first is not None

    # When the agent has renewed its own lease more than three times
    agent_key = s.agent_lease_key("agent-1")
    held = await own_revision(services.server.url, agent_key, "agent-1") or 0
    await wait_for(lambda: _renewed(services.server.url, agent_key, "agent-1", held, 3), 10,
                   what="the agent's lease to be renewed three times")

    # Then the run's claim is still the write that granted it, never renewed
    assert await claim_revision(services.server.url, run["run_id"], "agent-1") == first

    # When the agent is killed with SIGKILL and another joins
    services["agent-1"].kill9()
    services.start("agent-2", "agent", JETCRON_AGENT_ID="agent-2", JETCRON_RUN_LEASE_TTL=TTL)

    # Then the run is lost once its agent's lease lapsed, and runs again on agent-2
    again = await the_run(client, "long", when=state_is("succeeded", "failed", "dead"), timeout=30,
                          what="the run to run again")
    assert (again["state"], again["attempt"], again["agent"]) == ("succeeded", 2, "agent-2")
    assert [(a["attempt"], a["agent"], a["outcome"]) for a in again["history"]] == [
        (1, "agent-1", "lost"), (2, "agent-2", "succeeded")]
    assert "lease expired" in again["history"][0]["reason"]


async def _renewed(url: str, key: str, writer: str, granted: int, times: int) -> bool:
    found = await own_revision(url, key, writer)
    # Each renewal is a write to the lease bucket: other writes land in between, so a count by revision would be
    # loose; the claim's revision moving on at all is what a bound claim never does.
    return found is not None and found > granted + times


async def _assigned(js: JetStreamContext, run_id: str, agent: str) -> int:
    """A placement's `assigned` CAS of the run to `agent`; the revision written (the attempt's token)."""
    runs = await js.key_value(s.BUCKET_RUNS)
    entry = await runs.get(run_id)
    new = apply(decode(entry.value or b"", Run), Change(event=RunEvent.ASSIGN, agents=[agent]), datetime.now(UTC))
    return int(await runs.update(run_id, encode(new), last=entry.revision))


async def test_a_claim_an_agent_of_the_previous_release_renews_itself_is_judged_by_its_own_ttl(
        services: Services, client: Client) -> None:
    # Given trackers, and a run recorded (a yearly job run by hand) with no placement or agent of this version
    await services.start_system(agents=0, core=("api", "run_tracker"), JETCRON_RUN_LEASE_TTL=TTL)
    job: dict[str, Any] = now_job("older", "true")
    job["spec"]["schedule"] = {"kind": "cron", "cron": "0 0 1 1 *"}
    await client.call("jobs.create", job)
    run_id = (await client.call("jobs.trigger", {"name": "older"}))["run_id"]
    nc = await nats.connect(services.server.url)
    try:
        # And an agent of the previous release renewing each run's own claim (JETCRON_LIVENESS=run there) running
        # it: assigned to it, its claim taken before its child with no agent lease bound, its start reported by
        # the events stream
        js = nc.jetstream()
        token = await _assigned(js, run_id, "agent-v1")
        leases = lease_store.on_server(js)
        claim = await leases.take(s.run_lease_key(run_id), "agent-v1", float(TTL), attempt=1)
        assert claim is not None and claim.value.bound == ""
        await js.publish(s.event_subject("started", "agent-v1"), encode(RunStarted(
            run_id=run_id, attempt=1, token=token, agent="agent-v1", at=datetime.now(UTC))),
            headers={"Nats-Msg-Id": s.msg_id(run_id, 1, "started")})
        await the_run(client, "older", when=state_is("running"), what="the run to be shown running")

        # When that agent renews the claim every TTL/3 for three TTLs
        until = time.monotonic() + 3 * float(TTL)
        while time.monotonic() < until:
            await asyncio.sleep(float(TTL) / 3)
            claim = await leases.renew(claim, float(TTL))

        # Then the run is still running at its first attempt: the claim's own TTL is its liveness
        now = await client.call("runs.get", {"run_id": run_id})
        assert (now["state"], now["attempt"], now["agent"]) == ("running", 1, "agent-v1")

        # When it renews no more (the agent died), then the run is lost once the claim has lapsed
        again = await the_run(client, "older", when=lambda r: r["attempt"] == 2, timeout=30,
                              what="the run's attempt to be lost")
        assert [(a["attempt"], a["agent"], a["outcome"]) for a in again["history"]][:1] == [
            (1, "agent-v1", "lost")]
        assert "lease expired" in again["history"][0]["reason"]
    finally:
        await nc.close()


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

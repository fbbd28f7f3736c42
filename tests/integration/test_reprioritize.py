"""Reprioritizing waiting work through the running services: a waiting run moved to critical (the CLI's
`runs set-priority`) starts before the runs queued ahead of it, a job's new priority moves its waiting runs with
`--apply-to-waiting`, each move is on the audit trail with who asked, a run that started cannot move, and a tenant
stays within its own runs and its policy's ceiling."""

from __future__ import annotations

import json

import nats
import pytest
from harness import Services
from placement_support import cli, job, one_run, runs_of
from test_placement_fairness import ONE_SLOT, fill_the_slot, gate_file, queued, start_order

from jetcron.sdk.client import Client
from jetcron.sdk.errors import ConflictError, ForbiddenError, NotFoundError
from jetcron.wire import subjects as s


async def _moves(url: str) -> list[dict[str, object]]:
    """Every `reprioritized` event on the audit trail."""
    nc = await nats.connect(url)
    try:
        sub = await nc.jetstream().subscribe(s.event_subject("reprioritized", "api"), ordered_consumer=True)
        found = []
        while True:
            try:
                msg = await sub.next_msg(timeout=1)
            except (TimeoutError, nats.errors.TimeoutError):
                return found
            found.append(json.loads(msg.data))
    finally:
        await nc.close()


async def test_a_waiting_run_moved_to_critical_starts_before_those_queued_ahead(
        services: Services, client: Client) -> None:
    # Given one agent with one slot, held, and three low runs queued behind it, then a job of two more low runs
    await services.start_system(agents=1, **ONE_SLOT)
    with gate_file() as gate:
        await fill_the_slot(client, gate)
        for name in ("first", "second", "third"):
            await client.call("jobs.create", job(name, "true", priority="low"))
        await queued(client, ["first", "second", "third"])
        late = (await runs_of(client, "third"))[0]["run_id"]
        # When the last one is moved to critical from the CLI
        out = cli(services.server.url, "runs", "set-priority", late, "critical", "-o", "json")
        assert json.loads(out)["state"] == "scheduled"
        # Then it starts first, the others in their order
        gate.touch()
        assert await start_order(client, ["first", "second", "third"]) == ["third", "first", "second"]
    # And the move is on the audit trail, saying who asked
    (move,) = await _moves(services.server.url)
    assert (move["run_id"], move["priority_from"], move["priority_to"], move["by"]) == (late, "low", "critical",
                                                                                          "admin")
    # And a run that has started (here: ended) cannot move
    with pytest.raises(ConflictError, match="only a run that has not started can be reprioritized"):
        await client.runs.set_priority(late, "low")


async def test_a_jobs_new_priority_moves_its_waiting_runs_with_apply_to_waiting(
        services: Services, client: Client) -> None:
    await services.start_system(agents=1, **ONE_SLOT)
    with gate_file() as gate:
        await fill_the_slot(client, gate)
        await client.call("jobs.create", job("ahead", "true"))
        await client.call("jobs.create", job("bulk", "true", priority="low"))
        await queued(client, ["ahead", "bulk"])
        # When the job's priority is raised for its waiting runs too
        cli(services.server.url, "jobs", "update", "bulk", "--priority", "high", "--apply-to-waiting")
        run = (await runs_of(client, "bulk"))[0]
        assert run["spec"]["priority"] == "high"
        gate.touch()
        assert await start_order(client, ["ahead", "bulk"]) == ["bulk", "ahead"]


async def test_a_tenant_moves_only_its_own_runs_within_its_ceiling(services: Services, client: Client) -> None:
    # Given tenant acme capped at high, and a waiting run of acme and one of beta
    await services.start_system(agents=0)
    await client.tenants.set("acme", max_priority="high")  # type: ignore[arg-type]
    await client.call("jobs.create", job("mine", "true", tenant="acme", priority="low"))
    await client.call("jobs.create", job("theirs", "true", tenant="beta", priority="low"))
    mine = (await one_run(client, "acme.mine", lambda r: r["state"] == "scheduled"))["run_id"]
    theirs = (await one_run(client, "beta.theirs", lambda r: r["state"] == "scheduled"))["run_id"]
    acme = Client(client.nc, tenant="acme")  # acme's subject (no auth here: the subject is what names the tenant)
    # When acme moves its own run within its ceiling: it moves
    assert (await acme.runs.set_priority(mine, "high")).spec.priority == "high"
    # Above its ceiling: refused, naming the ceiling
    with pytest.raises(ForbiddenError, match=r"tenant 'acme' may use priorities up to high \(its policy\)"):
        await acme.runs.set_priority(mine, "critical")
    # Another tenant's run reads as missing
    with pytest.raises(NotFoundError):
        await acme.runs.set_priority(theirs, "high")
    # And a job above the ceiling is refused at create too
    with pytest.raises(ForbiddenError):
        await acme.call("jobs.create", job("urgent", "true", priority="critical"))

"""The order waiting runs start in, through the running services (jetcron.core.placing.fairness.FairQueue decides it;
these check that placement, the tenants watch and the settings carry it out): one agent with one slot, filled by a run
held on a gate file, a backlog queued behind it, then capacity freed one run at a time, the start order read from the
run records. And a queue at its quota waits, saying so, while the tenant's other queue runs."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from harness import Services, wait_for
from placement_support import cli, job, one_run, runs_of

from jetcron.core.models import QueueQuota
from jetcron.sdk.client import Client
from jetcron.sdk.errors import InvalidError

ONE_SLOT = {"JETCRON_AGENT_CPU": "4", "JETCRON_AGENT_SLOTS": "1"}


@contextmanager
def gate_file() -> Iterator[Path]:
    gate = Path(f"/tmp/jetcron-gate-{uuid.uuid4().hex}")
    try:
        yield gate
    finally:
        gate.unlink(missing_ok=True)


def held_on(gate: Path) -> list[str]:
    return ["sh", "-c", f"while [ ! -e {gate} ]; do sleep 0.1; done"]


async def fill_the_slot(client: Client, gate: Path) -> None:
    """The one slot taken by a run that ends when the test makes the gate file."""
    await client.call("jobs.create", job("hold", *held_on(gate)))
    await one_run(client, "hold", lambda r: r["state"] == "running", timeout=30, what="the holding run to run")


async def queued(client: Client, keys: list[str]) -> None:
    """Every one of these jobs' runs waits in placement's queue (a reason is written once it has waited 1 s)."""

    async def all_waiting() -> bool:
        for key in keys:
            runs = await runs_of(client, key)
            if not (runs and runs[0]["state"] == "scheduled" and runs[0]["reason"]):
                return False
        return True

    await wait_for(all_waiting, 30, interval=0.3, what=f"the runs of {keys} to wait for placement")


async def start_order(client: Client, keys: list[str]) -> list[str]:
    """Once every job's run has succeeded: the job keys in the order their runs started (one slot: one at a time)."""

    async def done() -> list[dict[str, Any]] | None:
        runs = [(await runs_of(client, key)) for key in keys]
        if all(r and r[0]["state"] == "succeeded" for r in runs):
            return [r[0] for r in runs]
        return None

    finished: list[dict[str, Any]] = await wait_for(done, 60, interval=0.3, what="every queued run to succeed")
    starts = sorted((datetime.fromisoformat(r["started_at"]), key) for key, r in zip(keys, finished, strict=True))
    assert len({at for at, _ in starts}) == len(starts), f"two runs started at once on one slot: {starts}"
    return [key for _, key in starts]


async def test_priority_then_weights_then_queues_decide_which_run_starts_next(
        services: Services, client: Client) -> None:
    # Given one agent with one slot, held by a run until the test lets it end
    await services.start_system(agents=1, **ONE_SLOT)
    await client.tenants.set("a", weight=2)
    await client.tenants.set("b", weight=1)
    with gate_file() as gate:
        await fill_the_slot(client, gate)

        # And a backlog queued in the order first-come-first-served would get wrong: a low run of a first, then
        # a's normal runs in two queues (x, y), b's normal runs, and a critical run of b last
        backlog = [job("low", "true", tenant="a", priority="low")]
        backlog += [job(f"{q}-{i}", "true", tenant="a", queue=q) for q in ("x", "y") for i in range(3)]
        backlog += [job(f"b-{i}", "true", tenant="b") for i in range(6)]
        backlog += [job("critical", "true", tenant="b", priority="critical")]
        for body in backlog:
            await client.call("jobs.create", body)
        keys = [f"{body['spec']['tenant']}.{body['spec']['name']}" for body in backlog]
        await queued(client, keys)

        # When the slot frees, and each run frees it again as it ends
        gate.touch()
        order = await start_order(client, keys)

    # Then critical starts first and low last
    assert (order[0], order[-1]) == ("b.critical", "a.low"), order
    # And among the normal runs, while both tenants wait, a (weight 2) starts two for each of b's (weight 1)
    normal = order[1:-1]
    tenants = "".join(key[0] for key in normal)
    assert [sorted(tenants[i:i + 3]) for i in (0, 3, 6)] == [["a", "a", "b"]] * 3, normal
    assert tenants[9:] == "bbb", normal
    # And a's two queues take turns
    queues = [key.split(".")[1][0] for key in normal if key.startswith("a.")]
    assert all(one != other for one, other in pairwise(queues)), normal


async def test_a_low_run_that_waited_an_ageing_period_goes_before_newer_normal_runs(
        services: Services, client: Client) -> None:
    # Given placement promotes a waiting run one level per 3 s, and one agent slot held by a run
    ageing = 3.0
    await services.start_system(agents=1, JETCRON_PLACEMENT_AGEING_SECONDS=str(ageing), **ONE_SLOT)
    with gate_file() as gate:
        await fill_the_slot(client, gate)

        # And a low run waiting in placement's queue
        await client.call("jobs.create", job("old-low", "true", priority="low"))
        await queued(client, ["old-low"])
        # When normal runs come more than an ageing period after it was queued (so at every moment it is at
        # least one level above where they are, or both at critical, where it is the older)
        await asyncio.sleep(ageing + 1)
        for name in ("new-normal-1", "new-normal-2"):
            await client.call("jobs.create", job(name, "true"))
        await queued(client, ["new-normal-1", "new-normal-2"])
        gate.touch()
        order = await start_order(client, ["old-low", "new-normal-1", "new-normal-2"])

    # Then the low run starts first (without ageing it would start last)
    assert order[0] == "old-low", order


async def test_a_queue_at_its_quota_waits_saying_so_while_the_tenants_other_queue_runs(
        services: Services, client: Client) -> None:
    url = services.server.url
    await services.start_system(agents=1, JETCRON_AGENT_CPU="4")
    # Given tenant a's batch queue may hold 1 cpu at a time (set with the CLI), the tenant as a whole 3
    out = cli(url, "tenants", "set", "a", "--max-cpu", "3", "--queue-quota", "batch:cpu=1,memory=8192")
    assert "batch:cpu=1,memory=8192" in out, out
    with gate_file() as gate:
        # And a batch run holding that cpu until the test lets it end
        await client.call("jobs.create", job("first", *held_on(gate), tenant="a", queue="batch",
                                             resources={"cpu": 1}))
        await one_run(client, "a.first", lambda r: r["state"] == "running", timeout=30, what="the first run to run")

        # When another batch run and a run of the tenant's etl queue come
        await client.call("jobs.create", job("second", "true", tenant="a", queue="batch", resources={"cpu": 1}))
        await client.call("jobs.create", job("other", "true", tenant="a", queue="etl", resources={"cpu": 1}))

        # Then the batch run waits on its queue's quota, and `runs get` says so
        why = "quota: queue a/batch at 1/1 cpu (this run needs 1)"
        second = await one_run(client, "a.second", lambda r: r["state"] == "scheduled" and r["reason"] == why,
                               timeout=30, what="the second batch run to wait on its queue's quota")
        assert json.loads(cli(url, "runs", "get", second["run_id"], "-o", "json"))["reason"] == why
        # And the etl run runs meanwhile
        await one_run(client, "a.other", lambda r: r["state"] == "succeeded", timeout=30, what="the etl run to run")
        assert (await one_run(client, "a.second", lambda r: True))["state"] == "scheduled"

        # And once the first batch run ends, the second runs
        gate.touch()
        await one_run(client, "a.second", lambda r: r["state"] == "succeeded", timeout=30,
                      what="the second batch run to run")

    # And a bad queue quota is refused naming the field and the value, and the policy stays as it was
    with pytest.raises(InvalidError, match=r"queues\.batch\.max_cpu: must be a number >= 0") as refused:
        await client.tenants.set("a", queues={"batch": QueueQuota(max_cpu=-1)})
    assert (refused.value.field, refused.value.value) == ("queues.batch.max_cpu", "-1.0")
    [policy] = (await client.tenants.list()).items
    assert (policy.max_cpu, policy.queues) == (3, {"batch": QueueQuota(max_cpu=1, max_memory_mb=8192)})

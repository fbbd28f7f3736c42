"""A run due now starts before its claim on a real nats-server: one that ends within a quarter second writes no claim
at all, so its path is the job, the fire gate, the `assigned` write and the terminal write; one that goes on writes
its claim, bound to its agent's lease, before its start report. Its fencing token, in the child's environment and on
the record, is the revision of the record's `assigned` write, in a runs bucket made from the fencing floor, whether
the attempt claims before its child or not. A runs bucket made before (its sequence from 1) keeps the claim before
the child and its revision as the token."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import nats
from harness import Services, wait_for
from nats.aio.msg import Msg
from nats.js.api import KeyValueConfig
from test_liveness_per_agent import claim_revision
from test_runs import now_job, state_is, the_run

from jetcron.bus import lease as lease_store
from jetcron.sdk.client import Client
from jetcron.wire import subjects as s


class Writes:
    """Every write to the runs and lease buckets from before the first submit: the runs bucket's (key, revision,
    state) from a watch, the lease bucket's subjects from a core subscription."""

    def __init__(self) -> None:
        self.records: list[tuple[str, int, bytes]] = []
        self.leases: list[str] = []

    def assigned(self, run_id: str) -> list[int]:
        return [rev for key, rev, value in self.records if key == run_id and b'"state":"assigned"' in value]

    def claims(self, run_id: str) -> list[str]:
        return [subject for subject in self.leases if subject.endswith(f".{run_id}")]


@contextlib.asynccontextmanager
async def writes(url: str) -> AsyncIterator[Writes]:
    seen = Writes()
    nc = await nats.connect(url)
    kv = await nc.jetstream().key_value(s.BUCKET_RUNS)
    watcher = await kv.watch(">", include_history=False)

    async def follow() -> None:
        async for entry in watcher:
            if entry is not None and entry.value:
                seen.records.append((entry.key, entry.revision or 0, entry.value))

    async def lease(msg: Msg) -> None:
        seen.leases.append(msg.subject)

    sub = await nc.subscribe(f"$KV.{s.BUCKET_LEASES}.run.>", cb=lease)
    task = asyncio.create_task(follow())
    try:
        yield seen
    finally:
        task.cancel()
        await sub.unsubscribe()
        await watcher.stop()
        await nc.close()


async def test_a_run_that_ends_at_once_writes_no_claim_and_its_token_is_its_assignment(
        services: Services, client: Client, tmp_path: Path) -> None:
    # Given the system, and the runs and lease buckets watched
    await services.start_system(agents=1)
    async with writes(services.server.url) as seen:
        # When three runs due now each write their fencing token and end
        names = [f"quick{i}" for i in range(3)]
        for name in names:
            token_to = f'echo "$JETCRON_FENCING_TOKEN" > {tmp_path}/{name}'
            await client.call("jobs.create", now_job(name, "sh", "-c", token_to))
        runs = [await the_run(client, name, when=state_is("succeeded"), what=f"{name} to succeed") for name in names]

        # Then none wrote a claim; each token is its record's `assigned` revision, in the child and on the record
        for name, run in zip(names, runs, strict=True):
            assert seen.claims(run["run_id"]) == []
            assert await claim_revision(services.server.url, run["run_id"], "agent-1") is None
            assert seen.assigned(run["run_id"]) == [run["token"]]
            assert (tmp_path / name).read_text().strip() == str(run["token"])
            assert [(a["attempt"], a["token"], a["outcome"]) for a in run["history"]] == [
                (1, run["token"], "succeeded")]
        # And the tokens grow as the assignments were written, above every lease token (the runs bucket's floor)
        assert min(r["token"] for r in runs) > 10**15


async def test_a_run_that_goes_on_writes_its_claim_bound_to_its_agent_before_it_is_shown_running(
        services: Services, client: Client, tmp_path: Path) -> None:
    # Given the system
    await services.start_system(agents=1)
    async with writes(services.server.url) as seen:
        # When a run due now goes on for a second
        gate = tmp_path / "go"
        await client.call("jobs.create", now_job("slow", "sh", "-c", f"while [ ! -e {gate} ]; do sleep 0.05; done"))
        run = await the_run(client, "slow", when=state_is("running"), what="the run to be shown running")

        # Then its claim was written before its start report, once, bound to the agent's lease, while its token
        # is still its assignment's
        nc = await nats.connect(services.server.url)
        try:
            leases = lease_store.on_server(nc.jetstream())
            claim = await leases.own(s.run_lease_key(run["run_id"]), "agent-1")
            agent = await leases.own(s.agent_lease_key("agent-1"), "agent-1")
        finally:
            await nc.close()
        assert claim is not None and agent is not None
        assert (claim.value.holder, claim.value.attempt, claim.value.bound) == ("agent-1", 1, agent.value.nonce)
        assert seen.claims(run["run_id"]) == [s.lease_subject(s.run_lease_key(run["run_id"]), "agent-1")]
        assert seen.assigned(run["run_id"]) == [run["token"]] and claim.token != run["token"]

        # And it ends as any run does
        gate.touch()
        done = await the_run(client, "slow", when=state_is("succeeded"), what="the run to succeed")
        assert (done["attempt"], done["token"]) == (1, run["token"])


async def test_a_runs_bucket_made_before_keeps_the_claim_before_the_child_and_its_token(
        services: Services, client: Client, tmp_path: Path) -> None:
    # Given a cluster whose runs bucket was made before (its sequence starts at 1, below its lease tokens)
    nc = await nats.connect(services.server.url)
    try:
        await nc.jetstream().create_key_value(KeyValueConfig(bucket=s.BUCKET_RUNS, history=1))
    finally:
        await nc.close()
    await services.start_system(agents=1)
    async with writes(services.server.url) as seen:
        # When a run due now ends at once
        await client.call("jobs.create", now_job("older", "sh", "-c", f'echo "$JETCRON_FENCING_TOKEN" > {tmp_path}/t'))
        run = await the_run(client, "older", when=state_is("succeeded"), what="the run to succeed")

        # Then its claim was written, and its revision is the token (the child's and the record's)
        claim = await claim_revision(services.server.url, run["run_id"], "agent-1")
        assert len(seen.claims(run["run_id"])) == 1
        assert claim == run["token"] != seen.assigned(run["run_id"])[0]
        assert (tmp_path / "t").read_text().strip() == str(run["token"])


async def test_an_attempt_that_claims_before_its_child_keeps_the_assignments_token(
        services: Services, client: Client) -> None:
    # Given the system; a run assigned ahead of its due time claims before its child (its claim covers the wait), as
    # every attempt of an agent of the previous release set to claim first (JETCRON_RUN_CLAIM=eager there) does
    await services.start_system(agents=1)
    async with writes(services.server.url) as seen:
        # When a run due in a few seconds (staged ahead by the trigger's horizon) ends at once
        due = (datetime.now(UTC) + timedelta(seconds=4)).isoformat()
        await client.call("jobs.create", {"spec": {"name": "ahead", "command": ["true"],
                                                   "schedule": {"kind": "at", "at": due}}})
        run = await the_run(client, "ahead", when=state_is("succeeded"), timeout=30, what="the run to succeed")

        # Then it wrote its claim; its token is still its assignment's (a cluster's tokens never change kind, so
        # a run's next attempt never gets a lower one)
        await wait_for(lambda: bool(seen.claims(run["run_id"])), 5, what="the claim's write to be seen")
        assert len(seen.claims(run["run_id"])) == 1
        assert await claim_revision(services.server.url, run["run_id"], "agent-1") != run["token"]
        assert seen.assigned(run["run_id"]) == [run["token"]]

"""A NATS node's JetStream store exhausted under load, on one node of three and on all three: its limit
(`max_file_store`) lowered below what it holds, as a disk that fills leaves it (a restart with the lower limit:
nats-server refuses to lower it on a reload), and raised again by a reload, as an operator would. One node
full: the other two hold quorum and the system goes on; the full node catches up once its space returns. Every
node full of what jetcron may not let go (another stream): what is refused is refused with a named error and
changes nothing, nothing acknowledged is lost, and firing resumes by itself once space returns, no restart.

(A disk that really fills, ENOSPC, makes nats-server switch JetStream off on that node until it restarts, which
is the server's own behaviour and no client's to change: docs/decisions-nats.md.)"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import time
import urllib.request
from collections.abc import AsyncIterator, Awaitable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import nats.errors
import nats.js.errors
import pytest
from chaos_checks import loaded, start_system
from chaos_figures import Figures
from harness import Services, wait_for

from jetcron.bus.server import ServerNode, start_node, stop_node, wait_healthy, write_config
from jetcron.sdk.client import Client
from jetcron.sdk.errors import ApiError
from jetcron.wire import subjects as s

ROOM = "8GB"
T = TypeVar("T")


def _jsz(node: ServerNode) -> dict[str, Any]:
    with urllib.request.urlopen(f"http://127.0.0.1:{node.monitor_port}/jsz?streams=true&accounts=true",
                                timeout=5) as resp:
        return dict(json.load(resp))


def _configure(nodes: list[ServerNode], node: ServerNode, max_file_store: str | int) -> None:
    routes = [n.cluster_port for n in nodes if n.cluster_port is not None and n is not node]
    write_config(node, sync_always=True, routes=routes, max_file_store=str(max_file_store))


async def _shrink(nodes: list[ServerNode], node: ServerNode, max_file_store: int) -> None:
    """The node's store limit lowered, as a filling disk leaves it: a restart with the new limit (nats-server
    refuses to lower it on a reload)."""
    _configure(nodes, node, max_file_store)
    await asyncio.to_thread(stop_node, node)
    start_node(node)
    # (JetStream up: its streams may not fit the new limit, which is the fault)
    await asyncio.to_thread(wait_healthy, node, 30, js_only=True)
    await _limit_is(node, max_file_store)


async def _grow(nodes: list[ServerNode], node: ServerNode) -> None:
    """Room again: the limit raised by a configuration reload (SIGHUP), as an operator would, no restart."""
    _configure(nodes, node, ROOM)
    assert node.process is not None
    os.kill(node.process.pid, signal.SIGHUP)
    await _limit_is(node, None)


async def _limit_is(node: ServerNode, max_file_store: int | None) -> None:
    def applied() -> bool:
        limit = int(_jsz(node).get("config", {}).get("max_storage") or 0)
        return limit == max_file_store if max_file_store is not None else limit > 1 << 30

    await wait_for(lambda: asyncio.to_thread(applied), 15, what=f"{node.name}'s store limit to apply")


def _last_seqs(node: ServerNode, streams: tuple[str, ...]) -> tuple[int, ...]:
    found: dict[str, int] = {}
    for account in _jsz(node).get("account_details") or []:
        for detail in account.get("stream_detail") or []:
            found[detail["name"]] = int(detail["state"]["last_seq"])
    return tuple(found.get(name, -1) for name in streams)


def _every_second(name: str) -> dict[str, Any]:
    return {"spec": {"name": name, "command": ["true"], "schedule": {"kind": "every", "every_seconds": 1},
                     "misfire": {"catchup_window_seconds": 0, "grace_seconds": 0}}}


async def _succeeded(client: Client, job: str) -> int:
    return sum(r["state"] == "succeeded" for r in (await client.call("runs.list", {"job": job}))["items"])


@pytest.fixture
async def ticking(cluster_services: Services) -> AsyncIterator[Client]:
    """The system on a 3-node cluster, and a client of it, with a job `tick` that fires every second."""
    await start_system(cluster_services)
    client = await Client.connect(cluster_services.server.url, timeout=15)
    try:
        await client.call("jobs.create", _every_second("tick"))
        yield client
    finally:
        await client.close()


@pytest.mark.chaos
@pytest.mark.timeout(240)
async def test_one_node_out_of_store_the_others_go_on_and_it_catches_up(
        cluster_services: Services, ticking: Client, tmp_path: Path, figures: Figures) -> None:
    services, client = cluster_services, ticking
    nodes = services.server.nodes
    async with loaded(services, tmp_path, "one", figures) as settle:
        # When one node's store is left less than it already holds (as a disk filling up leaves it)
        victim = nodes[2]
        used = int((await asyncio.to_thread(_jsz, victim)).get("storage") or 0)
        await _shrink(nodes, victim, max(used // 2, 1 << 20))
        full_at = time.monotonic()
        # Then the two others hold quorum: the ticking job goes on being fired and run
        before = await _succeeded(client, "tick")
        await wait_for(lambda: _succeeded_at_least(client, "tick", before + 5), 40,
                       what="tick to run on the two nodes with room")
        figures["fired_while_full"] = await _succeeded(client, "tick") - before
        # When its space returns
        await _grow(nodes, victim)
        figures["full_s"] = time.monotonic() - full_at
        # Then every acknowledged run ran once, and the full node stores what its peers store
        await settle()
        streams = (s.kv_stream(s.BUCKET_JOBS), s.kv_stream(s.BUCKET_RUNS))

        def caught_up() -> bool:
            return len({_last_seqs(n, streams) for n in nodes}) == 1

        started = time.monotonic()
        await wait_for(lambda: asyncio.to_thread(caught_up), 60, what="the full node to catch up")
        figures["fault"], figures["catch_up_s"] = "one node's store full", time.monotonic() - started


async def _runs_of(client: Client, job: str) -> set[str]:
    """The keys of the job's run records in the runs bucket, read from the stream itself (not through the api)."""
    info = await client.nc.jetstream().stream_info(s.kv_stream(s.BUCKET_RUNS), subjects_filter=s.RUN_CHANGES)
    return {subject for subject in (info.state.subjects or {}) if f".{job}." in subject}


async def _answers(client: Client) -> bool:
    try:
        await client.call("jobs.get", {"name": "manual"})
    except ApiError:
        return False
    return True


async def _fill(client: Client) -> tuple[int, str]:
    """The headroom every node has left filled by a stream of another's, which jetcron may not let go, until the
    server refuses a publish: the bytes that went in, and the server's refusal (its error code and description)."""
    js = client.nc.jetstream()

    async def made() -> bool:
        # After the rolling restart the meta group may still be electing or catching up: a stream create can
        # time out, answer 10008 (unavailable) or 10005 (no suitable peers: a restarted peer not yet seen
        # online) though jetcron's own reads and writes answer again. Making a stream is idempotent with the
        # same config, so it is asked again, within a bound.
        try:
            await js.add_stream(name="FILLER", subjects=["filler.>"], num_replicas=3)
        except nats.js.errors.APIError as exc:
            if exc.err_code not in (10005, 10008):
                raise
            return False
        return True

    await wait_for(made, 60, interval=1.0, what="the filler stream to be made", ignore=(nats.errors.TimeoutError,))
    chunk, stored = b"x" * (512 << 10), 0
    while True:
        try:
            await js.publish("filler.x", chunk, timeout=10)
        except nats.js.errors.APIError as exc:
            return stored, f"{exc.err_code} {exc.description}"
        stored += len(chunk)


async def _unless_unavailable(read: Awaitable[T]) -> tuple[T] | None:
    """A read of a full cluster, None while it answers `unavailable` (a full store's raft groups answer 10008,
    JetStream temporarily unavailable, now and then): the caller asks again."""
    try:
        return (await read,)
    except (ApiError, nats.errors.TimeoutError) as exc:
        if isinstance(exc, ApiError) and exc.code != "unavailable":
            raise
        return None


async def _succeeded_since(client: Client, job: str, since: datetime) -> int:
    items = (await client.call("runs.list", {"job": job}))["items"]
    return sum(r["state"] == "succeeded" and datetime.fromisoformat(r["scheduled_at"]) >= since for r in items)


async def _succeeded_at_least(client: Client, job: str, count: int) -> bool:
    return await _succeeded(client, job) >= count


@pytest.mark.chaos
@pytest.mark.timeout(300)
async def test_every_node_out_of_store_refuses_by_name_loses_nothing_and_fires_again_by_itself(
        cluster_services: Services, ticking: Client, tmp_path: Path, figures: Figures) -> None:
    services, client = cluster_services, ticking
    nodes = services.server.nodes
    await client.call("jobs.create", {"spec": {"name": "manual", "command": ["true"],
                                               "schedule": {"kind": "at", "at": "2099-01-01T00:00:00Z"}}})
    async with loaded(services, tmp_path, "all", figures) as settle:
        await wait_for(lambda: _succeeded_at_least(client, "tick", 2), 30, what="tick to run")
        assert await _runs_of(client, "manual") == set()
        # When every node is left a store smaller than the space jetcron's streams reserve (each has its
        # max_bytes): a rolling restart with the smaller limit, as disks replaced by smaller ones leave them
        for node in nodes:
            await _shrink(nodes, node, int((await asyncio.to_thread(_jsz, node)).get("storage") or 0) + (16 << 20))
        full_at = time.monotonic()
        # And what is left filled by another stream, as a disk shared with something else fills: the server says so
        await wait_for(lambda: _answers(client), 60, what="the cluster to answer after the restarts")
        filled, server_said = await _fill(client)
        assert server_said == "10023 insufficient resources", server_said
        figures["filled_mb"] = filled / (1 << 20)

        # Then a run asked for now is refused, retryable, and nothing of it is stored: as storage_full, naming what
        # it could not write, where a stream's leader answers the write; as `unavailable` where every node being
        # over its limit leaves the write no answer (docs/operations.md, "Storage pressure"). Which one comes is
        # the server's: storage_full is waited for while the answers are `unavailable`, and `unavailable` is
        # taken when nothing else came for 30 s. A trigger accepted is a failure either way.
        answers: list[str] = []

        async def refused() -> ApiError | None:
            try:
                await client.call("jobs.trigger", {"name": "manual", "key": "k1"})
            except ApiError as exc:
                answers.append(exc.code)
                return None if exc.code == "unavailable" else exc
            answers.append("accepted")
            return None

        try:
            error = await wait_for(refused, 30, interval=1.0, what="a trigger to be refused for storage")
        except AssertionError:
            assert answers and set(answers) == {"unavailable"}, answers
            error = None
        assert "accepted" not in answers, answers
        figures["refused_with"] = "unavailable" if error is None else error.code
        if error is not None:
            assert (error.code, error.retryable) == ("storage_full", True), error
            assert re.fullmatch(
                r"create jc_runs/manual\.\d{8}T\d{9}Z-m[0-9a-f]{12}: storage full \(insufficient resources\)\. The "
                r"run tracker lets the oldest finished runs go near a limit; if this lasts, raise the limit "
                r"\(JETCRON_\*_MAX_BYTES, or the server's max_file_store\) or shorten JETCRON_HISTORY_KEEP_SECONDS "
                r"\(docs/operations\.md, \"Storage pressure\"\); retry later", str(error)), str(error)
            # And it stored nothing: no run record of `manual` in the runs bucket, read from the stream itself
            (stored,) = await wait_for(lambda: _unless_unavailable(_runs_of(client, "manual")), 30,
                                       what="the runs bucket to answer")
            assert stored == set(), stored
        # When space returns (each node's limit raised by a reload)
        for node in nodes:
            await _grow(nodes, node)
        freed, freed_at = time.monotonic(), datetime.now(UTC)
        figures["full_s"] = freed - full_at
        # Then firing resumes by itself, the refused request can be made again, every job is still there
        # (counted from runs due after the limits were raised: while every node is full a list of runs answers
        # `unavailable`, 10008 from the runs stream, so no count is taken then)
        async def resumed() -> bool:
            done = await _unless_unavailable(_succeeded_since(client, "tick", freed_at))
            return done is not None and done[0] >= 3

        await wait_for(resumed, 90, what="tick to run again")
        # (and the refused trigger stored nothing, read once the stream answers again whichever refusal it was)
        (stored,) = await wait_for(lambda: _unless_unavailable(_runs_of(client, "manual")), 30,
                                   what="the runs bucket to answer")
        assert stored == set(), stored
        figures["firing_resumed_s"] = time.monotonic() - freed
        run = await client.call("jobs.trigger", {"name": "manual", "key": "k1"})
        assert run["state"] in ("scheduled", "assigned", "running", "succeeded")
        assert {"tick", "manual"} <= {j["spec"]["name"] for j in (await client.call("jobs.list", {}))["items"]}
        figures["fault"] = "every node's store full (its limit lowered, the rest filled by another stream)"
        # And every acknowledged run ran once
        await settle()

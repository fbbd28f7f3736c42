"""Faults that do not announce themselves: a NATS server that stops answering but keeps its sockets open (SIGSTOP),
and a link that drops everything both ways without a reset (a fault proxy's blackhole). Each process notices
within a bounded time (its client's pings go unanswered: jetcron.bus.connect.PING_INTERVAL), says so on /readyz
and jetcron_nats_connected, and comes back by itself when the fault ends; SIGTERM during the fault still ends
every service and agent within 10 s (compose's default stop grace), with a line that says why and no traceback.
An agent cut off silently mid-run is fenced as one cut off loudly: test_chaos_agent.py's partition is this
blackhole."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest
from chaos_checks import loaded, start, start_system
from chaos_figures import Figures
from chaos_proxy import FaultProxy
from harness import ServiceProcess, Services, wait_for

from jetcron.bus.server import ServerNode
from jetcron.core.ids import DEFAULT_TENANT
from jetcron.core.lifecycle.notify import Notice
from jetcron.core.models import RunState
from jetcron.sdk.client import Client
from jetcron.wire import subjects as s

NOTICE_S = 12.0
"""The bound on noticing: four ping intervals (2 s) until the client gives the connection up
(jetcron.bus.connect.MAX_OUTSTANDING_PINGS), and slack for a loaded machine."""
RECOVER_S = 30.0
STOP_S = 10.0
"""Compose's default stop grace: SIGTERM to exit, whatever the server does."""
WITHOUT_NATS = "stopping without NATS: the server does not answer (gone, frozen or unreachable)"
"""What a process says when it stops without its server (services/jetcron_services/runtime/stopping.py,
services/jetcron_services/agent/service.py)."""
LOST = "NATS connection lost (the server is gone, frozen or unreachable): reconnecting"
"""What a process says when its client gives the connection up (jetcron.bus.connect)."""


def _health(proc: ServiceProcess) -> str:
    """The process's own HTTP port (it says where when it starts): answers whatever NATS does."""
    found = re.search(r'"metrics_url": "http://[^:/"]+:(\d+)/metrics"', proc.output())
    assert found, f"{proc.name} did not say where its health port is:\n{proc.output()[-2000:]}"
    return f"http://127.0.0.1:{found.group(1)}"  # (it names the host by its name; it listens on loopback too)


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


async def _connected_gauge(proc: ServiceProcess) -> float:
    _, text = await asyncio.to_thread(_get, _health(proc) + "/metrics")
    found = re.search(r"^jetcron_nats_connected (\S+)$", text, re.M)
    assert found, f"{proc.name} has no jetcron_nats_connected"
    return float(found.group(1))


async def _until_ready(procs: Iterable[ServiceProcess], ready: bool, within: float, since: float
                       ) -> dict[str, float]:
    """Seconds from `since` until each process's /readyz said `ready` (503 naming NATS when not)."""
    async def one(proc: ServiceProcess) -> tuple[str, float]:
        url = _health(proc) + "/readyz"

        async def says() -> bool:
            status, body = await asyncio.to_thread(_get, url)
            return status == 200 if ready else (status == 503 and "not connected to NATS" in body)

        await wait_for(says, within, interval=0.2, what=f"{proc.name}'s /readyz to say {'' if ready else 'not '}ready")
        return proc.name, time.monotonic() - since

    return dict(await asyncio.gather(*(one(p) for p in procs)))


def _connz_names(node: ServerNode) -> list[str]:
    _, text = _get(f"http://127.0.0.1:{node.monitor_port}/connz?limit=1024")
    return [c.get("name", "") for c in json.loads(text).get("connections") or []]


@contextlib.contextmanager
def _frozen(nodes: list[ServerNode]) -> Iterator[None]:
    """SIGSTOP for the block, SIGCONT whatever happens (a stopped node would not hear the teardown's SIGTERM)."""
    pids = [n.process.pid for n in nodes if n.process is not None]
    for pid in pids:
        os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        for pid in pids:
            os.kill(pid, signal.SIGCONT)


def _kind(proc: ServiceProcess) -> str:
    """The name its connection carries: jetcron-<service> (jetcron.bus.connect)."""
    return f"jetcron-{proc.argv[-1].rsplit('.', 1)[-1]}"


def _since(proc: ServiceProcess, offset: int) -> str:
    return proc.output()[offset:]


def _busiest(nodes: list[ServerNode], procs: list[ServiceProcess]) -> tuple[ServerNode, Counter[str]]:
    """The node most of the processes are connected to, and how many of each kind are (a connection names its
    kind, not its process: jetcron-<service>)."""
    names = {n.name: _connz_names(n) for n in nodes}
    victim = max(nodes, key=lambda n: sum(x.startswith("jetcron-") for x in names[n.name]))
    on_victim = Counter(x for x in names[victim.name] if x in {_kind(p) for p in procs})
    assert on_victim, names
    return victim, on_victim


async def _sigterm_every_process(procs: list[ServiceProcess]) -> dict[str, float]:
    """SIGTERM to each at once; the seconds until each exited (waited for past the bound, to say by how much)."""
    asked = time.monotonic()
    for proc in procs:
        proc.terminate()

    async def exited(proc: ServiceProcess) -> tuple[str, float]:
        await wait_for(lambda: not proc.alive, STOP_S + 5, interval=0.05, what=f"{proc.name} to exit")
        return proc.name, time.monotonic() - asked

    return dict(await asyncio.gather(*(exited(p) for p in procs)))


def _stopped_cleanly(procs: list[ServiceProcess], offsets: dict[str, int], stops: dict[str, float]) -> None:
    """Each exited within 10 s, exit code 0, no traceback."""
    assert {n: round(s, 1) for n, s in stops.items() if s > STOP_S} == {}
    for proc in procs:
        said = _since(proc, offsets[proc.name])
        assert "Traceback" not in said, f"{proc.name}:\n{said[-3000:]}"
        assert proc.proc is not None and proc.proc.returncode == 0, f"{proc.name}: {proc.proc.returncode}"


@pytest.mark.chaos
@pytest.mark.parametrize("fault", ["frozen", "silent"])
async def test_sigterm_with_the_server_hung_stops_every_process_within_10s(
        services: Services, figures: Figures, fault: str) -> None:
    node = services.server.nodes[0]
    proxy = await FaultProxy(node.port).start()
    env = {"JETCRON_NATS_URL": proxy.url} if fault == "silent" else {}
    try:
        # Given every service, the notifier, the gateway and an agent, on their default stop grace
        await services.start_system(agents=1, core=("api", "trigger", "placement", "run_tracker", "notifier"), **env)
        gateway = services.start("gateway", "gateway", JETCRON_HTTP_PORT="0", **env)
        await gateway.wait_logged("gateway ready", 30)
        procs = list(services.procs.values())
        offsets = {p.name: len(p.output()) for p in procs}

        # When the server stops answering: frozen (SIGSTOP), or behind a link that drops everything silently
        started = time.monotonic()
        with _frozen([node]) if fault == "frozen" else contextlib.nullcontext():
            if fault == "silent":
                proxy.blackhole()
                # (each noticing it first: the measured bound, and the line the stop then writes)
                noticed = await _until_ready(procs, False, NOTICE_S, started)
                figures["noticed_max_s"] = max(noticed.values())
            # and every process gets SIGTERM (the frozen server's at once, before any has noticed)
            stops = await _sigterm_every_process(procs)
        figures["fault"], figures["stop_max_s"] = f"server {fault}", max(stops.values())
        # Then each has exited within 10 s, exit code 0, no traceback
        _stopped_cleanly(procs, offsets, stops)
        # with a line that says why
        for proc in procs:
            said = _since(proc, offsets[proc.name])
            assert WITHOUT_NATS in said, f"{proc.name}:\n{said[-2000:]}"
    finally:
        await proxy.close()


@pytest.mark.chaos
async def test_sigterm_with_one_node_of_three_frozen_stops_every_process_within_10s(
        cluster_services: Services, figures: Figures) -> None:
    services = cluster_services
    # Given every service, the notifier, the gateway and an agent on a 3-node cluster, on their default stop grace
    await start_system(services, agents=1)
    await asyncio.gather(start(services, "notifier", "notifier"),
                         start(services, "gateway", "gateway", JETCRON_HTTP_PORT="0"))
    procs = list(services.procs.values())
    offsets = {p.name: len(p.output()) for p in procs}

    # When the node most of them are connected to is frozen, and every process gets SIGTERM at once
    victim, on_victim = await asyncio.to_thread(_busiest, services.server.nodes, procs)
    with _frozen([victim]):
        stops = await _sigterm_every_process(procs)
    figures["fault"], figures["clients_on_frozen_node"] = "one node of three frozen", sum(on_victim.values())
    figures["stop_max_s"] = max(stops.values())

    # Then each has exited within 10 s, exit code 0, no traceback
    _stopped_cleanly(procs, offsets, stops)
    # and each of the frozen node's clients said why: it stopped without NATS, or it left the node first
    for proc in (p for p in procs if _kind(p) in on_victim):
        said = _since(proc, offsets[proc.name])
        assert WITHOUT_NATS in said or LOST in said, f"{proc.name}:\n{said[-2000:]}"


async def _acts_again(client: Client, gateway: ServiceProcess, token: str, name: str, figures: Figures) -> None:
    """A job made through the gateway's REST API (tenant acme's token) runs and succeeds, and the notifier tells
    the subject a job's rule names of its run, finished after the fault: the seconds until each."""
    found = re.search(r"http://127\.0\.0\.1:(\d+)/api/v1", gateway.output())
    assert found, gateway.output()[-2000:]
    assert client.nc is not None
    got: list[Notice] = []

    async def on_notice(msg: Any) -> None:
        got.append(msgspec.json.decode(msg.data, type=Notice))

    sub = await client.nc.subscribe(s.notify_subject(DEFAULT_TENANT, f"hung.{name}"), cb=on_notice)
    await client.nc.flush()
    started = time.monotonic()
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{found.group(1)}", timeout=10,
                                     headers={"Authorization": f"Bearer {token}"}) as http:
            made = await http.post("/api/v1/jobs", json={"name": f"{name}-rest", "command": ["true"]})
            assert made.status_code == 201, made.text
            await client.call("jobs.create", {"spec": {"name": f"{name}-notified", "command": ["true"], "notify": [
                {"on": ["succeeded"], "subject": f"hung.{name}"}]}})

            async def rest_job_ended() -> dict[str, Any] | None:
                job = (await http.get(f"/api/v1/jobs/{name}-rest")).json()
                state = job.get("state")
                return job if state not in (None, "paused") and RunState(state).terminal else None

            job = await wait_for(rest_job_ended, 30, interval=0.2, what="the job made through the gateway to end")
            assert (job["status"], job["state"]) == ("completed", "succeeded"), job
            figures["gateway_job_s"] = time.monotonic() - started
        (notice,) = await wait_for(lambda: got, 30, interval=0.1, what=f"the notice on jc.notify.*.hung.{name}")
        assert (notice.event, notice.job, notice.tenant, notice.state) == (
            "succeeded", f"{name}-notified", DEFAULT_TENANT, "succeeded"), notice
        figures["notified_s"] = time.monotonic() - started
    finally:
        await sub.unsubscribe()


@pytest.mark.chaos
@pytest.mark.timeout(240)
@pytest.mark.parametrize("fault", ["one_node_frozen", "every_node_frozen", "every_link_silent"])
async def test_a_hung_server_is_noticed_and_left_or_waited_out_without_a_restart(
        cluster_services: Services, tmp_path: Path, figures: Figures, fault: str) -> None:
    services = cluster_services
    nodes = services.server.nodes
    proxies = [await FaultProxy(n.port).start() for n in nodes]
    through = {"JETCRON_NATS_URL": ",".join(p.url for p in proxies)}
    silent = fault == "every_link_silent"
    client: Client | None = None
    try:
        # Given the system, the notifier and the gateway on a 3-node cluster (through fault proxies for the silent
        # link), under a load of runs
        await start_system(services, agent_env={name: through for name in (
            "api", "trigger-1", "placement", "run_tracker", "agent-1", "agent-2")} if silent else None)
        env = through if silent else {}
        await asyncio.gather(start(services, "notifier", "notifier", **env),
                             start(services, "gateway", "gateway", JETCRON_HTTP_PORT="0", **env))
        client = await Client.connect(services.server.url, timeout=15)
        token = (await client.tokens.create(tenant="acme")).token
        procs = list(services.procs.values())
        offsets = {p.name: len(p.output()) for p in procs}
        prefix = fault.split("_")[0][:3]
        async with loaded(services, tmp_path, prefix, figures) as settle:
            if fault == "one_node_frozen":
                # When the node most of them are connected to is frozen
                # (a connection names its kind, not its process: which of two agents it is shows when it notices)
                victim, on_victim = await asyncio.to_thread(_busiest, nodes, procs)
                started = time.monotonic()
                with _frozen([victim]):
                    # Then as many of each kind as it served notice, and each leaves it for another node and is
                    # back, the node still frozen
                    def lost() -> list[ServiceProcess]:
                        return [p for p in procs if LOST in _since(p, offsets[p.name])]

                    await wait_for(lambda: Counter(_kind(p) for p in lost()) == on_victim, NOTICE_S + 5,
                                   interval=0.1, what=f"the clients of {victim.name} ({dict(on_victim)}) to notice")

                    async def back(proc: ServiceProcess) -> float:
                        await wait_for(lambda: "NATS connection back" in _since(proc, offsets[proc.name]),
                                       NOTICE_S + 10, interval=0.1, what=f"{proc.name} to reconnect elsewhere")
                        return time.monotonic() - started

                    moved = await asyncio.gather(*(back(p) for p in lost()))
                    figures["clients_moved"], figures["moved_max_s"] = len(moved), max(moved)
                    # and each says ready on /readyz, its gauge at 1, the node still frozen
                    await _until_ready(procs, True, RECOVER_S, started)
                    assert [await _connected_gauge(p) for p in procs] == [1.0] * len(procs)
                    await asyncio.sleep(5)
                figures["fault"] = "one node frozen"
            else:
                # When every node is frozen, or every process's link goes silent, for the time to notice and 8 s
                started = time.monotonic()
                with _frozen(nodes) if fault == "every_node_frozen" else contextlib.nullcontext():
                    if silent:
                        for p in proxies:
                            p.blackhole()
                    # Then each process notices within the bound: /readyz 503 naming NATS, the gauge at 0
                    noticed = await _until_ready(procs, False, NOTICE_S, started)
                    assert {p.name: await _connected_gauge(p) for p in procs} == {p.name: 0.0 for p in procs}
                    await asyncio.sleep(8)
                    healed = time.monotonic()
                    for p in proxies:
                        p.heal()
                # And once the fault ends each is ready again by itself, no restart (every process still the same)
                recovered = await _until_ready(procs, True, RECOVER_S, healed)
                assert {p.name: await _connected_gauge(p) for p in procs} == {p.name: 1.0 for p in procs}
                figures["fault"] = fault.replace("_", " ")
                figures["noticed_max_s"], figures["recovered_max_s"] = max(noticed.values()), max(recovered.values())
            assert [p.name for p in procs if not p.alive] == []
            # And every acknowledged run ran once and succeeded
            await settle()
        # And the gateway and the notifier act again: a job made through REST runs, a finished run is notified
        await _acts_again(client, services["gateway"], token, f"after-{prefix}", figures)
        for proc in procs:
            assert "Traceback" not in _since(proc, offsets[proc.name]), proc.name
    finally:
        if client is not None:
            await client.close()
        for p in proxies:
            await p.close()

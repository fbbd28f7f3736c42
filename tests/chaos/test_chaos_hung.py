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

import pytest
from chaos_checks import loaded, start_system
from chaos_figures import Figures
from chaos_proxy import FaultProxy
from harness import ServiceProcess, Services, wait_for

from jetcron.bus.server import ServerNode

NOTICE_S = 12.0
"""The bound on noticing: four ping intervals (2 s) until the client gives the connection up
(jetcron.bus.connect.MAX_OUTSTANDING_PINGS), and slack for a loaded machine."""
RECOVER_S = 30.0
STOP_S = 10.0
"""Compose's default stop grace: SIGTERM to exit, whatever the server does."""


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
    """The name its connection carries: jetcron-<service> (bus/connect.py)."""
    return f"jetcron-{proc.argv[-1].rsplit('.', 1)[-1]}"


def _since(proc: ServiceProcess, offset: int) -> str:
    return proc.output()[offset:]


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
            asked = time.monotonic()
            for proc in procs:
                proc.terminate()

            # Then each has exited within 10 s
            async def exited(proc: ServiceProcess) -> tuple[str, float]:
                await wait_for(lambda: not proc.alive, STOP_S + 5, interval=0.05, what=f"{proc.name} to exit")
                return proc.name, time.monotonic() - asked

            stops = dict(await asyncio.gather(*(exited(p) for p in procs)))
        figures["fault"], figures["stop_max_s"] = f"server {fault}", max(stops.values())
        assert {n: round(s, 1) for n, s in stops.items() if s > STOP_S} == {}
        # with a line that says why, and no traceback
        for proc in procs:
            said = _since(proc, offsets[proc.name])
            assert "Traceback" not in said, f"{proc.name}:\n{said[-3000:]}"
            assert proc.proc is not None and proc.proc.returncode == 0, f"{proc.name}: {proc.proc.returncode}"
            if fault == "silent":
                assert "stopping without NATS: the server does not answer" in said, f"{proc.name}:\n{said[-2000:]}"
    finally:
        await proxy.close()


@pytest.mark.chaos
@pytest.mark.timeout(240)
@pytest.mark.parametrize("fault", ["one_node_frozen", "every_node_frozen", "every_link_silent"])
async def test_a_hung_server_is_noticed_and_left_or_waited_out_without_a_restart(
        cluster_services: Services, tmp_path: Path, figures: Figures, fault: str) -> None:
    services = cluster_services
    nodes = services.server.nodes
    proxies = [await FaultProxy(n.port).start() for n in nodes]
    through = {"JETCRON_NATS_URL": ",".join(p.url for p in proxies)}
    try:
        # Given the system on a 3-node cluster (through fault proxies for the silent link), under a load of runs
        await start_system(services, agent_env={name: through for name in (
            "api", "trigger-1", "placement", "run_tracker", "agent-1", "agent-2")} if fault == "every_link_silent"
            else None)
        procs = list(services.procs.values())
        offsets = {p.name: len(p.output()) for p in procs}
        async with loaded(services, tmp_path, fault.split("_")[0][:3], figures) as settle:
            if fault == "one_node_frozen":
                # When the node most of them are connected to is frozen
                names = {n.name: await asyncio.to_thread(_connz_names, n) for n in nodes}
                victim = max(nodes, key=lambda n: sum(x.startswith("jetcron-") for x in names[n.name]))
                # (a connection names its kind, not its process: which of two agents it is shows when it notices)
                on_victim = Counter(x for x in names[victim.name] if x in {_kind(p) for p in procs})
                assert on_victim, names
                started = time.monotonic()
                with _frozen([victim]):
                    # Then as many of each kind as it served notice, and each leaves it for another node and is
                    # back, the node still frozen
                    def lost() -> list[ServiceProcess]:
                        return [p for p in procs if "NATS connection lost" in _since(p, offsets[p.name])]

                    await wait_for(lambda: Counter(_kind(p) for p in lost()) == on_victim, NOTICE_S + 5,
                                   interval=0.1, what=f"the clients of {victim.name} ({dict(on_victim)}) to notice")

                    async def back(proc: ServiceProcess) -> float:
                        await wait_for(lambda: "NATS connection back" in _since(proc, offsets[proc.name]),
                                       NOTICE_S + 10, interval=0.1, what=f"{proc.name} to reconnect elsewhere")
                        return time.monotonic() - started

                    moved = await asyncio.gather(*(back(p) for p in lost()))
                    figures["clients_moved"], figures["moved_max_s"] = len(moved), max(moved)
                    await asyncio.sleep(5)
                figures["fault"] = "one node frozen"
            else:
                # When every node is frozen, or every process's link goes silent, for the time to notice and 8 s
                started = time.monotonic()
                with _frozen(nodes) if fault == "every_node_frozen" else contextlib.nullcontext():
                    if fault == "every_link_silent":
                        for p in proxies:
                            p.blackhole()
                    # Then each process notices within the bound: /readyz 503 naming NATS, the gauge at 0
                    noticed = await _until_ready(procs, False, NOTICE_S, started)
                    assert [await _connected_gauge(p) for p in procs] == [0.0] * len(procs)
                    await asyncio.sleep(8)
                    healed = time.monotonic()
                    for p in proxies:
                        p.heal()
                # And once the fault ends each is ready again by itself, no restart (every process still the same)
                recovered = await _until_ready(procs, True, RECOVER_S, healed)
                assert [await _connected_gauge(p) for p in procs] == [1.0] * len(procs)
                figures["fault"] = fault.replace("_", " ")
                figures["noticed_max_s"], figures["recovered_max_s"] = max(noticed.values()), max(recovered.values())
            assert [p.name for p in procs if not p.alive] == []
            # And every acknowledged run ran once and succeeded
            await settle()
        for proc in procs:
            assert "Traceback" not in _since(proc, offsets[proc.name]), proc.name
    finally:
        for p in proxies:
            await p.close()

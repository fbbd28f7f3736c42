"""A virtual fleet: N agents in one process, each the agent's own protocol code with a simulated executor.

Each virtual agent is `services.agent.service.Agent` served by its `_serve` (heartbeat, its durable consumer on
JC_ASSIGN, its control and hand-off subscriptions, run leases and fencing tokens, reports), booted with
`runtime.boot` into a Context of its own: its own id, settings, NATS connection and credential. It runs on an event
loop of its own in a thread of its own, so that each can be frozen, cut off or killed alone, as a host would be:

- freeze: its loop blocks in a callback (SIGSTOP): no heartbeat, renewal or report, nothing read from its socket;
  its timers are overdue when it is thawed, and it wakes to stale leases as a stopped process does;
- cut off: its sockets are shut and new ones refused until reconnected: it keeps running, and its own deadlines
  fence its attempts (a partition);
- kill: its sockets are shut and its loop stops at once: none of its tasks runs again (SIGKILL), nothing says
  goodbye, its entry in jc_agents ages out.

What a virtual agent does not share with a real one is in docs/fleet.md.

`python -m bench.fleet --sizes 50,200,500` measures its cost at each size on a real system (nats-server, fsync
before ack, and the core services as processes): memory per virtual agent, server consumers and subscriptions per
agent, heartbeat writes per second, and runs submitted `now` that must all succeed, each exactly once. With
--faults one agent is killed, one frozen and thawed, one cut off and reconnected, and each is seen to stop (and
resume) its heartbeat. With --processes P (or --per-process M) the agents are spread over child processes, each
a Fleet of its share (ProcessFleet), for sizes one interpreter cannot carry. Prints one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import multiprocessing
import os
import socket
import sys
import tempfile
import threading
import time
import urllib.request
import weakref
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any

import nats

from bench.common import System, emit, submit_now_jobs, system
from jetcron.auth.local import LocalCreds
from jetcron.config import Settings
from jetcron.core.host.sim import SimExecution
from jetcron.core.models import Run
from jetcron.sdk.client import Client
from jetcron.wire import subjects as s
from jetcron.wire.codec import decode
from jetcron.wire.messages import RunFinished
from jetcron_services.agent.host.limits import RLIMIT, LimitRoot
from jetcron_services.agent.host.offer import HostSetup
from jetcron_services.agent.service import Agent, _serve
from jetcron_services.runtime import Context, boot

START_BATCH = 50
"""Agents booting at once: each boot connects, reads the server's /jsz and opens its buckets."""
SUBMIT_CONCURRENCY = 64
RESUME_LIMIT = 10.0
"""Seconds a heartbeat in flight when an agent's link dropped waits for its ack (the JetStream timeout)."""


class _Killed(SystemExit):
    """Raised inside a virtual agent's loop to stop it where it stands: asyncio lets SystemExit out of a callback
    (any other exception is only logged), so nothing else of that agent runs."""


class _Loop(asyncio.SelectorEventLoop):
    """A virtual agent's event loop: its sockets can be shut and new ones refused (its link cut)."""

    def __init__(self) -> None:
        super().__init__()
        self.cut = False
        self.links: weakref.WeakSet[asyncio.BaseTransport] = weakref.WeakSet()

    async def create_connection(self, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        # nats-py connects (and reconnects) through asyncio.open_connection, which comes here.
        if self.cut:
            raise ConnectionRefusedError("virtual agent cut off")
        transport, protocol = await super().create_connection(*args, **kwargs)
        self.links.add(transport)
        return transport, protocol

    def shut_links(self) -> None:
        """The server sees the connection end at once; the client sees its end of file, as a dropped link."""
        for transport in list(self.links):
            sock = transport.get_extra_info("socket")
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)


class VirtualAgent:
    """One agent of the fleet: its thread, loop, Context and Agent."""

    def __init__(self, settings: Settings, setup: HostSetup, sim: SimExecution, executor: ThreadPoolExecutor) -> None:
        assert settings.agent_id
        self.agent_id = settings.agent_id
        self.settings = settings
        self.setup = setup
        self.sim = sim
        self.loop = _Loop()
        # One pool for the fleet's blocking calls (each boot's /jsz read): a default executor per loop is a
        # thread per agent more.
        self.loop.set_default_executor(executor)
        self.ctx: Context | None = None
        self.agent: Agent | None = None
        self.ready = threading.Event()
        self.ended = threading.Event()
        self.error: BaseException | None = None
        self._thawed = threading.Event()
        self._thawed.set()
        self._frozen = threading.Event()
        self._killed = False
        self.thread = threading.Thread(target=self._main, name=f"fleet-{self.agent_id}", daemon=True)

    @property
    def state(self) -> str:
        if self._killed:
            return "killed"
        if self.ended.is_set():
            return "failed" if self.error is not None else "stopped"
        if self._frozen.is_set():
            return "frozen"
        if self.loop.cut:
            return "cut off"
        return "running" if self.ready.is_set() else "starting"

    def _main(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_until_complete(self._life())
        except _Killed:
            pass
        except BaseException as exc:  # a virtual agent that fails says so through its state, not the fleet's end
            self.error = exc
        finally:
            self.ended.set()

    async def _life(self) -> None:
        ctx = self.ctx = await boot("agent", self.settings)
        agent = self.agent = Agent(ctx, self.agent_id, self.setup, None, sim=self.sim)
        ready = asyncio.ensure_future(ctx.ready.wait())
        ready.add_done_callback(lambda _: self.ready.set())
        try:
            await _serve(ctx, agent, self.setup, None)
        finally:
            ready.cancel()
            await ctx.link.close(drain=1.0 if ctx.link.connected() else None, timeout=0.5)

    def _hold(self) -> None:
        """The loop's own thread, frozen: it runs nothing until thawed (or killed)."""
        self._frozen.set()
        self._thawed.wait()
        self._frozen.clear()
        if self._killed:
            self._die()

    def _die(self) -> None:
        self.loop.cut = True
        self.loop.shut_links()
        raise _Killed

    def freeze(self, timeout: float = 5.0) -> None:
        if self.state != "running":
            raise RuntimeError(f"{self.agent_id} is {self.state}: only a running agent is frozen")
        self._thawed.clear()
        self.loop.call_soon_threadsafe(self._hold)
        if not self._frozen.wait(timeout):
            raise TimeoutError(f"{self.agent_id}: its loop did not come to the freeze within {timeout}s")

    def thaw(self) -> None:
        self._thawed.set()

    def cut_off(self, timeout: float = 5.0) -> None:
        self._in_loop(self._cut, True, timeout=timeout)

    def reconnect(self, timeout: float = 5.0) -> None:
        self._in_loop(self._cut, False, timeout=timeout)

    def _cut(self, cut: bool) -> None:
        self.loop.cut = cut
        if cut:
            self.loop.shut_links()

    def _in_loop(self, fn: Callable[[bool], None], arg: bool, *, timeout: float) -> None:
        """Call fn(arg) on the agent's own loop and wait until it has: the caller sees its state changed."""
        if self.state not in ("running", "cut off"):
            raise RuntimeError(f"{self.agent_id} is {self.state}: only a running agent is cut off or reconnected")
        done = threading.Event()

        def call() -> None:
            fn(arg)
            done.set()

        self.loop.call_soon_threadsafe(call)
        if not done.wait(timeout):
            raise TimeoutError(f"{self.agent_id}: its loop did not answer within {timeout}s")

    def kill(self, timeout: float = 5.0) -> None:
        self._killed = True
        if self._frozen.is_set() or not self._thawed.is_set():
            self._thawed.set()  # its frozen loop wakes only to die
        else:
            self.loop.call_soon_threadsafe(self._die)
        self.thread.join(timeout)

    def stop(self) -> None:
        """As SIGTERM: drain, withdraw its entry, close its connection."""
        self._thawed.set()
        if self.ctx is not None and not self.ended.is_set():
            self.loop.call_soon_threadsafe(self._cut, False)
            self.loop.call_soon_threadsafe(self.ctx.stop.set)


class Fleet:
    """N virtual agents `<prefix>-<first>` .. `<prefix>-<first + N - 1>` of one process; `creds(agent_id)` names
    each one's own credential file when the server runs with auth (None: connect without)."""

    def __init__(self, base: Settings, agents: int, *, slots: int, sim: SimExecution, prefix: str = "agent",
                 creds: Callable[[str], str | None] = lambda _: None, first: int = 1) -> None:
        setup = HostSetup(gpus=(0, None, []), runtime=None, limits=LimitRoot(RLIMIT),
                          capacity=(float(slots), 1024 * slots))
        self.executor = ThreadPoolExecutor(max_workers=8, thread_name_prefix="fleet-io")
        self.agents: dict[str, VirtualAgent] = {}
        for i in range(first, first + agents):
            agent_id = f"{prefix}-{i}"
            settings = base.model_copy(update={"agent_id": agent_id, "nats_creds": creds(agent_id),
                                               "agent_sim": True, "agent_slots": slots})
            self.agents[agent_id] = VirtualAgent(settings, setup, sim, self.executor)

    def start(self, timeout: float = 120.0) -> None:
        """Boot every agent, START_BATCH at a time, until each has its consumer and control subscription."""
        deadline = time.monotonic() + timeout
        members = list(self.agents.values())
        for first in range(0, len(members), START_BATCH):
            batch = members[first:first + START_BATCH]
            for member in batch:
                member.thread.start()
            for member in batch:
                while not member.ready.wait(0.1):
                    if member.ended.is_set() or time.monotonic() > deadline:
                        raise RuntimeError(f"{member.agent_id} did not start: {member.state} {member.error!r}")

    def kill(self, agent_id: str) -> None:
        self.agents[agent_id].kill()

    def freeze(self, agent_id: str) -> None:
        self.agents[agent_id].freeze()

    def thaw(self, agent_id: str) -> None:
        self.agents[agent_id].thaw()

    def cut_off(self, agent_id: str) -> None:
        self.agents[agent_id].cut_off()

    def reconnect(self, agent_id: str) -> None:
        self.agents[agent_id].reconnect()

    def states(self) -> dict[str, str]:
        return {agent_id: member.state for agent_id, member in self.agents.items()}

    def stop(self, timeout: float = 30.0) -> list[str]:
        """Stop every living agent as SIGTERM stops one; the ids of those still running after `timeout`."""
        living = [m for m in self.agents.values() if m.thread.is_alive() and not m._killed]
        for member in living:
            member.stop()
        deadline = time.monotonic() + timeout
        for member in living:
            member.thread.join(max(0.0, deadline - time.monotonic()))
        self.executor.shutdown(wait=False)
        return [m.agent_id for m in living if m.thread.is_alive()]


class ProcessFleet:
    """N virtual agents `<prefix>-1` .. `<prefix>-N` spread over `processes` child processes, each a `Fleet` of
    its own share, driven from this one: one interpreter's GIL carries ~500 agents on a 2 s heartbeat, so past
    that an agent waits its turn long enough for its heartbeats to be late. The methods are `Fleet`'s; each
    reaches the child that hosts the agent over a pipe and returns once that child has done it (or raises what
    it raised there). `creds` maps an agent id to its credential file (missing: connect without)."""

    def __init__(self, base: Settings, agents: int, *, processes: int, slots: int, seconds: str, exit_codes: str,
                 log: Path, prefix: str = "agent", creds: dict[str, str] | None = None) -> None:
        # spawn, not fork: the parent holds threads (its clients, the system's log pumps) that a fork would copy
        # mid-state; each child imports afresh.
        mp = multiprocessing.get_context("spawn")
        self.agents: dict[str, int] = {}
        """Agent id -> the index of the child hosting it."""
        self.children: list[tuple[BaseProcess, Connection]] = []
        first = 1
        for k in range(processes):
            count = agents // processes + (1 if k < agents % processes else 0)
            ids = [f"{prefix}-{i}" for i in range(first, first + count)]
            own = {a: creds[a] for a in ids if a in creds} if creds else {}
            mine, theirs = mp.Pipe()
            proc = mp.Process(target=_host, name=f"fleet-{k}", daemon=True,
                              args=(theirs, base, first, count, slots, seconds, exit_codes, own, prefix,
                                    str(log.with_name(f"{log.stem}.{k}{log.suffix}"))))
            proc.start()
            theirs.close()
            self.children.append((proc, mine))
            self.agents.update(dict.fromkeys(ids, k))
            first += count
        for k in range(processes):
            self._answer(k, 120.0)  # each child has imported and built its agents (none started)

    def pids(self) -> list[int]:
        return [proc.pid for proc, _ in self.children if proc.pid is not None]

    def _answer(self, k: int, timeout: float) -> Any:
        proc, conn = self.children[k]
        if not conn.poll(timeout):
            raise TimeoutError(f"fleet process {k} (pid {proc.pid}) did not answer within {timeout}s")
        status, value = conn.recv()
        if status != "ok":
            raise RuntimeError(f"fleet process {k}: {value}")
        return value

    def _each(self, method: str, arg: Any, timeout: float) -> list[Any]:
        """Ask every child at once (they work in parallel), then collect each one's answer."""
        for _, conn in self.children:
            conn.send((method, arg))
        return [self._answer(k, timeout) for k in range(len(self.children))]

    def _one(self, method: str, agent_id: str) -> None:
        k = self.agents[agent_id]
        self.children[k][1].send((method, agent_id))
        self._answer(k, 30.0)

    def start(self, timeout: float = 120.0) -> None:
        """Each child boots its share in turn: as many agents boot at once as in one process (START_BATCH), not
        START_BATCH per child (at 2,000 agents over 8 children, 400 boots at once starved every loop on two cores
        long enough for agents' pings to go unanswered and their connections to be given up)."""
        for k, (_, conn) in enumerate(self.children):
            conn.send(("start", timeout))
            self._answer(k, timeout + 30.0)

    def kill(self, agent_id: str) -> None:
        self._one("kill", agent_id)

    def freeze(self, agent_id: str) -> None:
        self._one("freeze", agent_id)

    def thaw(self, agent_id: str) -> None:
        self._one("thaw", agent_id)

    def cut_off(self, agent_id: str) -> None:
        self._one("cut_off", agent_id)

    def reconnect(self, agent_id: str) -> None:
        self._one("reconnect", agent_id)

    def states(self) -> dict[str, str]:
        states: dict[str, str] = {}
        for part in self._each("states", None, 60.0):
            states.update(part)
        return states

    def stop(self, timeout: float = 30.0) -> list[str]:
        """Each child stops its living agents as `Fleet.stop` does, then exits; the ids still running after
        `timeout` (every agent of a child that did not answer)."""
        left: list[str] = []
        for _, conn in self.children:
            with contextlib.suppress(OSError):
                conn.send(("stop", timeout))
        for k, (proc, _) in enumerate(self.children):
            try:
                left += self._answer(k, timeout + 30.0)
            except (OSError, EOFError, TimeoutError, RuntimeError):
                left += [a for a, host in self.agents.items() if host == k]
            proc.join(10.0)
            if proc.is_alive():
                proc.kill()
                proc.join()
        return left


def _host(conn: Connection, base: Settings, first: int, count: int, slots: int, seconds: str, exit_codes: str,
          creds: dict[str, str], prefix: str, log: str) -> None:
    """A child of a ProcessFleet: its Fleet of `count` agents from `first`, doing what the parent asks."""
    # The agents' JSON logs go to stdout (structlog binds it at boot): to this child's log file, not the parent's.
    sys.stdout = open(log, "w", buffering=1)  # noqa: SIM115 - the child's stdout until it exits
    fleet = Fleet(base, count, slots=slots, sim=SimExecution.parse(seconds, exit_codes), prefix=prefix,
                  creds=creds.get, first=first)
    conn.send(("ok", None))
    while True:
        try:
            method, arg = conn.recv()
        except (EOFError, OSError):
            os._exit(1)  # the parent is gone: nobody to drive or stop this fleet
        try:
            value: Any = None
            if method == "start":
                fleet.start(timeout=arg)
            elif method == "states":
                value = fleet.states()
            elif method == "stop":
                conn.send(("ok", fleet.stop(timeout=arg)))
                os._exit(0)  # as main(): killed agents' loops hold sockets and tasks never run again
            elif method in ("kill", "freeze", "thaw", "cut_off", "reconnect"):
                getattr(fleet, method)(arg)
            else:
                raise ValueError(f"no such fleet call: {method}")
        except Exception as exc:  # the parent raises it, naming this child
            conn.send(("error", f"{type(exc).__name__}: {exc}"))
            continue
        conn.send(("ok", value))


# --- the measurement ---------------------------------------------------------------------------------------------


def _rss() -> int:
    """This process's resident memory in bytes."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


def _monitor(jc: System, path: str) -> dict[str, Any]:
    with urllib.request.urlopen(f"{jc.server.monitor_url}{path}", timeout=10) as resp:
        data: dict[str, Any] = json.loads(resp.read())
    return data


def _stream_seq(jc: System, stream: str) -> int:
    for account in _monitor(jc, "/jsz?streams=true").get("account_details", []):
        for detail in account.get("stream_detail", []):
            if detail["name"] == stream:
                return int(detail["state"]["last_seq"])
    raise KeyError(stream)


def _server_view(jc: System, agents: int) -> dict[str, Any]:
    """What the server holds for the fleet: its connections and their subscriptions, and JC_ASSIGN's consumers."""
    conns = _monitor(jc, f"/connz?subs=1&limit={agents + 100}").get("connections", [])
    mine = [c for c in conns if c.get("name") == "jetcron-agent"]
    consumers = 0
    for account in _monitor(jc, "/jsz?consumers=true").get("account_details", []):
        for detail in account.get("stream_detail", []):
            if detail["name"] == s.STREAM_ASSIGN:
                consumers = len(detail.get("consumer_detail", []))
    subs = sum(int(c.get("subscriptions", 0)) for c in mine)
    return {"connections": len(mine), "subscriptions": subs, "assign_consumers": consumers,
            "subscriptions_per_agent": subs / max(1, len(mine)), "consumers_per_agent": consumers / max(1, agents),
            "server_mem_bytes": int(_monitor(jc, "/varz")["mem"])}


async def _entry_revisions(jc: System, agent_ids: list[str]) -> dict[str, int]:
    """Each agent's entry revision in jc_agents (0: none): a heartbeat moves it on."""
    nc = await nats.connect(jc.url, **jc.identity.options())
    try:
        kv = await nc.jetstream().key_value(s.BUCKET_AGENTS)
        revisions: dict[str, int] = {}
        for agent_id in agent_ids:
            try:
                entry = await kv.get(agent_id)
                revisions[agent_id] = int(entry.revision or 0)
            except nats.js.errors.KeyNotFoundError:
                revisions[agent_id] = 0
        return revisions
    finally:
        await nc.close()


async def _runs(jc: System, count: int, prefix: str, timeout: float) -> dict[str, Any]:
    """Submit `count` one-shot jobs (runs due now) through the API; wait until each run has ended; then read every
    record and every RunFinished: each run must have succeeded at its first attempt, reported exactly once."""
    client = await Client.connect(jc.url, timeout=60, identity=jc.identity)
    nc = await nats.connect(jc.url, **jc.identity.options())
    js = nc.jetstream()
    kv = await js.key_value(s.BUCKET_RUNS)
    ended: dict[str, Run] = {}
    all_ended = asyncio.Event()

    async def watch() -> None:
        watcher = await kv.watch(">")
        async for entry in watcher:
            if entry is None or entry.value is None or not entry.key.startswith(prefix):
                continue
            run = decode(entry.value, Run)
            if run.state.terminal:
                ended[entry.key] = run
                if len(ended) >= count:
                    all_ended.set()
                    await watcher.stop()
                    return

    watching = asyncio.create_task(watch())
    started = time.perf_counter()
    await submit_now_jobs(client, prefix, count, ["true"], concurrency=SUBMIT_CONCURRENCY)
    timed_out = False
    try:
        await asyncio.wait_for(all_ended.wait(), timeout=timeout)
    except TimeoutError:
        timed_out = True  # a size too large for this machine: what did end is still counted below
    finally:
        watching.cancel()
    elapsed = time.perf_counter() - started
    # Every report stored, from the stream's start: one more than one per run would show as a second report.
    finished = await finished_reports(js, prefix)
    await client.close()
    await nc.close()
    succeeded_first = [r for r in ended.values() if r.state == "succeeded" and r.attempt == 1]
    return {"runs": count, "ended": len(ended), "succeeded_first_attempt": len(succeeded_first),
            "reported_once": sum(1 for r in ended if finished[r] == 1),
            "reported_twice_or_more": sum(1 for r in ended if finished[r] > 1),
            "agents_used": len({r.agent for r in ended.values()}), "submit_to_all_ended_s": round(elapsed, 3),
            "runs_timed_out_after_s": timeout if timed_out else None}


async def finished_reports(js: Any, prefix: str, outcome: str = "", quiet: float = 2.0) -> Counter[str]:
    """RunFinished reports per run of the runs whose id starts with `prefix` (only those saying `outcome`, when
    given), every report stored from the events stream's start; read until none comes for `quiet` seconds."""
    found: Counter[str] = Counter()
    sub = await js.subscribe(s.event_subject("finished", ">"), ordered_consumer=True)
    while True:
        try:
            msg = await sub.next_msg(timeout=quiet)
        except nats.errors.TimeoutError:
            break
        event = decode(msg.data, RunFinished)
        if event.run_id.startswith(prefix) and (not outcome or event.outcome == outcome):
            found[event.run_id] += 1
    await sub.unsubscribe()
    return found


def _silent(jc: System, ids: list[str], heartbeat: float) -> list[str]:
    """Those of `ids` whose entry in jc_agents moved on over three heartbeats (none should)."""
    before = asyncio.run(_entry_revisions(jc, ids))
    time.sleep(3 * heartbeat)  # other agents' heartbeats go on meanwhile: the server's time, not a clock of ours
    after = asyncio.run(_entry_revisions(jc, ids))
    return [agent_id for agent_id in ids if after[agent_id] != before[agent_id]]


def _resumed(jc: System, ids: list[str], limit: float, heartbeat: float) -> dict[str, float | None]:
    """Seconds until each of `ids` heartbeats again (None: not within `limit`)."""
    started, before = time.monotonic(), asyncio.run(_entry_revisions(jc, ids))
    seen: dict[str, float | None] = dict.fromkeys(ids)
    while time.monotonic() - started < limit and None in seen.values():
        time.sleep(heartbeat / 4)
        now = asyncio.run(_entry_revisions(jc, ids))
        for agent_id in ids:
            if seen[agent_id] is None and now[agent_id] != before[agent_id]:
                seen[agent_id] = round(time.monotonic() - started, 2)
    return seen


def _faults(jc: System, fleet: Fleet | ProcessFleet, heartbeat: float) -> dict[str, Any]:
    """Kill one agent, freeze one, cut one off: each stops heartbeating, and the frozen and cut ones resume."""
    ids = list(fleet.agents)
    killed, frozen, cut = ids[0], ids[1], ids[2]
    fleet.kill(killed)
    fleet.freeze(frozen)
    fleet.cut_off(cut)
    states_during = {a: fleet.states()[a] for a in (killed, frozen, cut)}
    heartbeat_while_silent = _silent(jc, [killed, frozen, cut], heartbeat)
    fleet.thaw(frozen)
    fleet.reconnect(cut)
    # A heartbeat whose write was in flight when the link dropped waits out its JetStream timeout (10 s) before
    # the next one is sent, as a real agent's does: the bound is that timeout and a heartbeat, with room.
    resumed = _resumed(jc, [frozen, cut], RESUME_LIMIT + 2 * heartbeat, heartbeat)
    states_after = {a: fleet.states()[a] for a in (killed, frozen, cut)}
    others = Counter(state for a, state in fleet.states().items() if a not in (killed, frozen, cut))
    return {"states_during": states_during, "states_after": states_after, "others": dict(others),
            "heartbeat_while_silent": heartbeat_while_silent, "resumed_after_s": resumed}


def _proc_rss(pid: int) -> int:
    """A process's resident memory in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for {pid}")


def _proc_cpu(pids: list[int]) -> float:
    """CPU seconds (user and system) the processes have spent, all their threads together."""
    total = 0
    for pid in pids:
        with contextlib.suppress(OSError):
            # after the command's closing parenthesis: state is field 3, utime and stime fields 14 and 15
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


async def _registered_count(jc: System) -> int:
    """Agents with a live entry in jc_agents: its stream's messages, one per key (history 1; an aged-out entry
    leaves none, and no agent withdraws its entry while measured). Not `kv.keys()`: its watcher, racing 30
    heartbeats a second, once answered no keys at all for 1,000 live ones."""
    nc = await nats.connect(jc.url, **jc.identity.options())
    try:
        info = await nc.jetstream().stream_info(f"KV_{s.BUCKET_AGENTS}")
        return int(info.state.messages)
    finally:
        await nc.close()


def _await_registered(jc: System, agents: int, timeout: float) -> int:
    """Poll jc_agents until all `agents` have an entry or `timeout` passes; the count last seen."""
    deadline = time.monotonic() + timeout
    while True:
        count = asyncio.run(_registered_count(jc))
        if count >= agents or time.monotonic() > deadline:
            return count
        time.sleep(1.0)


def _lost(jc: System) -> int:
    """How many times the run tracker saw an agent's entry age out (a heartbeat late past its entry's age)."""
    path = jc.base / "run_tracker.log"
    return path.read_text(errors="replace").count("agent lost") if path.exists() else 0


def processes_for(args: argparse.Namespace, agents: int) -> int:
    """--per-process M: as many processes as M agents each need; else --processes."""
    if args.per_process:
        return max(1, math.ceil(agents / int(args.per_process)))
    return max(1, int(args.processes))


def measure(jc: System, args: argparse.Namespace, agents: int, log: Any) -> dict[str, Any]:
    # Every finish by the events stream: "each run once" counts the reports stored there (finished_reports).
    base = Settings(nats_url=jc.url, nats_monitor_url=jc.server.monitor_url, data_dir=str(jc.base),
                    allow_unsafe_storage=not jc.server.sync_always, heartbeat=args.heartbeat,
                    agent_entry_seconds=args.entry,
                    agent_cpu=float(args.slots), agent_memory_mb=1024 * args.slots, report_by="stream")
    sim = SimExecution.parse(args.seconds, args.exit_codes)
    local = LocalCreds.ensure(jc.base / "auth", agents) if jc.creds is not None else None

    def creds(agent_id: str) -> str | None:
        """Each virtual agent its own credential, minted as `jetcron up` mints a host's (auth on)."""
        return str(local.path(agent_id)) if local is not None else None

    processes = processes_for(args, agents)
    server_pids, service_pids = jc.server.pids(), {name: proc.pid for name, proc in jc.procs.items()}
    server_before = _server_view(jc, 0)["server_mem_bytes"]
    fleet: Fleet | ProcessFleet
    if processes == 1:
        fleet_pids = [os.getpid()]
        rss_before = _rss()
        fleet = Fleet(base, agents, slots=args.slots, sim=sim, creds=creds)
    else:
        ids = [f"agent-{i}" for i in range(1, agents + 1)]
        fleet = ProcessFleet(base, agents, processes=processes, slots=args.slots, seconds=args.seconds,
                             exit_codes=args.exit_codes, log=args.log,
                             creds={a: c for a in ids if (c := creds(a)) is not None})
        fleet_pids = fleet.pids()
        # the children's interpreters and imports, before any agent boots: not a cost per agent
        rss_before = sum(_proc_rss(pid) for pid in fleet_pids)
    started, cpu_started, server_started = time.perf_counter(), _proc_cpu(fleet_pids), _proc_cpu(server_pids)
    try:
        try:
            with contextlib.redirect_stdout(log):  # the agents' JSON logs (structlog's, bound to stdout at boot)
                fleet.start(timeout=max(120.0, agents / 20))
        except (RuntimeError, TimeoutError) as exc:
            # This size does not fit: say what was seen (how far the boot got, the CPU it took), not a crash.
            span = time.perf_counter() - started
            return {"agents": agents, "processes": processes, "did_not_fit": f"{exc}", "boot_gave_up_after_s":
                    round(span, 1), "states_when_given_up": dict(Counter(fleet.states().values())),
                    "registered_when_given_up": asyncio.run(_registered_count(jc)),
                    "fleet_cpu_during_boot_pct": round(100 * (_proc_cpu(fleet_pids) - cpu_started) / span, 1),
                    "server_cpu_during_boot_pct": round(100 * (_proc_cpu(server_pids) - server_started) / span, 1),
                    "fleet_rss_mib": round(sum(_proc_rss(pid) for pid in fleet_pids) / 2**20, 1),
                    "server_mem_mib": round(_server_view(jc, agents)["server_mem_bytes"] / 2**20, 1),
                    "agents_lost_total": _lost(jc)}
        boot_s = time.perf_counter() - started
        registered = _await_registered(jc, agents, timeout=2 * args.entry)
        register_s = time.perf_counter() - started
        time.sleep(args.settle if args.settle is not None else 2 * args.heartbeat)  # every agent has beaten again
        rss_after = sum(_proc_rss(pid) for pid in fleet_pids)
        view = _server_view(jc, agents)
        cpu0, server0 = _proc_cpu(fleet_pids), _proc_cpu(server_pids)
        services0 = {name: _proc_cpu([pid]) for name, pid in service_pids.items()}
        seq0, stored0, lost0, t0 = _stream_seq(jc, f"KV_{s.BUCKET_AGENTS}"), _total_stored(jc), _lost(jc), \
            time.monotonic()
        time.sleep(args.window)  # an idle fleet: only heartbeats (and the services' own upkeep)
        cpu1, server1 = _proc_cpu(fleet_pids), _proc_cpu(server_pids)
        services1 = {name: _proc_cpu([pid]) for name, pid in service_pids.items()}
        seq1, stored1, lost1, t1 = _stream_seq(jc, f"KV_{s.BUCKET_AGENTS}"), _total_stored(jc), _lost(jc), \
            time.monotonic()
        registered_after_window = asyncio.run(_registered_count(jc))
        runs = asyncio.run(_runs(jc, args.runs, f"f{agents}x", timeout=max(60.0, args.runs / 10)))
        faults = _faults(jc, fleet, args.heartbeat) if args.faults else None
        states = Counter(fleet.states().values())
    finally:
        left = fleet.stop()
    span = t1 - t0
    result = {
        "agents": agents, "processes": processes, "boot_s": round(boot_s, 2),
        "registered": registered, "register_all_s": round(register_s, 2),
        "registered_after_window": registered_after_window,
        "rss_per_agent_kib": round((rss_after - rss_before) / agents / 1024, 1),
        "fleet_rss_mib": round(rss_after / 2**20, 1),
        "server_mem_per_agent_kib": round((view["server_mem_bytes"] - server_before) / agents / 1024, 1),
        "server_mem_mib": round(view.pop("server_mem_bytes") / 2**20, 1),
        **view,
        "heartbeat_writes_per_s": round((seq1 - seq0) / span, 1),
        "heartbeat_writes_expected_per_s": round(agents / args.heartbeat, 1),
        "all_writes_idle_per_s": round((stored1 - stored0) / span, 1),
        "fleet_cpu_idle_pct": round(100 * (cpu1 - cpu0) / span, 1),
        "server_cpu_idle_pct": round(100 * (server1 - server0) / span, 1),
        "services_cpu_idle_pct": {name: round(100 * (services1[name] - services0[name]) / span, 1)
                                  for name in service_pids},
        "agents_lost_in_window": lost1 - lost0, "agents_lost_total": _lost(jc),
        "states_at_end": dict(states), "not_stopped": left, **runs,
    }
    if faults is not None:
        result["faults"] = faults
    return result


def _total_stored(jc: System) -> int:
    total = 0
    for account in _monitor(jc, "/jsz?streams=true").get("account_details", []):
        for detail in account.get("stream_detail", []):
            total += int(detail["state"]["last_seq"])
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="50,200,500", help="comma-separated fleet sizes, one system each")
    parser.add_argument("--runs", type=int, default=1000, help="runs submitted `now` at each size")
    parser.add_argument("--slots", type=int, default=5)
    parser.add_argument("--seconds", default="uniform:0.5,2", help="simulated duration (jetcron.core.host.sim)")
    parser.add_argument("--exit-codes", default="0", help="simulated exit codes with weights, e.g. 0:95,1:5")
    parser.add_argument("--heartbeat", type=float, default=2.0)
    parser.add_argument("--entry", type=float, default=30.0,
                        help="seconds an agent's entry in jc_agents outlives its last heartbeat (agent_entry_seconds)")
    parser.add_argument("--settle", type=float, default=None,
                        help="seconds after all registered before measuring (default: two heartbeats)")
    parser.add_argument("--processes", type=int, default=1,
                        help="fleet processes; 1 hosts the agents in the bench's own process")
    parser.add_argument("--per-process", type=int, default=0,
                        help="agents per fleet process: as many processes as each size needs (overrides --processes)")
    parser.add_argument("--window", type=float, default=10.0, help="seconds of the idle fleet's write rate")
    parser.add_argument("--faults", action="store_true", help="kill one, freeze one, cut one off, and check")
    parser.add_argument("--auth", action="store_true", help="operator-mode auth: each agent its own credential")
    parser.add_argument("--log", type=Path, default=Path(tempfile.gettempdir()) / "jetcron-fleet.log",
                        help="the virtual agents' log (one file for every size: loggers keep the file they got)")
    args = parser.parse_args()
    sizes = [int(n) for n in args.sizes.split(",")]
    results = []
    log = args.log.open("w")
    for agents in sizes:
        # the services judge heartbeats and entries by the same settings as the agents
        with system(sync_always=True, auth=args.auth, services=("api", "trigger", "placement", "run_tracker"),
                    JETCRON_HEARTBEAT=str(args.heartbeat), JETCRON_AGENT_ENTRY_SECONDS=str(args.entry)) as jc:
            results.append(measure(jc, args, agents, log))
        print(json.dumps(results[-1]), file=sys.stderr, flush=True)  # progress, one size at a time
        if "did_not_fit" in results[-1]:
            break  # a larger size fits no better
    emit({"bench": "fleet", "sync_always": True, "slots": args.slots, "heartbeat_s": args.heartbeat,
          "entry_s": args.entry, "processes": args.processes, "per_process": args.per_process,
          "sim": {"seconds": args.seconds, "exit_codes": args.exit_codes}, "runs_per_size": args.runs,
          "auth": args.auth, "sizes": results, "commit": _commit(),
          "date": time.strftime("%Y-%m-%d", time.gmtime())})
    os._exit(0)  # killed agents' loops hold sockets and tasks that are never run again: leave without them


def _commit() -> str:
    with contextlib.suppress(OSError):
        head = (Path(__file__).resolve().parents[1] / ".git" / "HEAD").read_text().strip()
        if head.startswith("ref: "):
            return (Path(__file__).resolve().parents[1] / ".git" / head[5:]).read_text().strip()[:12]
        return head[:12]
    return ""


if __name__ == "__main__":
    main()

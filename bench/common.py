"""Shared bench harness: an embedded server, every service as a process, stats from the server, medians."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jetcron.auth.certs import ensure_local_tls
from jetcron.auth.local import LocalCreds
from jetcron.bus.connect import Identity
from jetcron.bus.server import EmbeddedNats

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"


def summary(values: list[float]) -> dict[str, float]:
    """Median with min and max: the figure and its spread on a noisy shared machine."""
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "n": len(values)}


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    k = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[k]


def _stream_states(monitor_url: str) -> dict[str, dict[str, Any]]:
    """Each stream's state (`/jsz`), by name."""
    with urllib.request.urlopen(f"{monitor_url}/jsz?streams=true", timeout=5) as resp:
        data = json.loads(resp.read())
    return {stream["name"]: stream.get("state", {}) for account in data.get("account_details", [])
            for stream in account.get("stream_detail", [])}


def stored_messages(monitor_url: str) -> int:
    """Every message the server stored (stream publishes and KV writes): acknowledged writes so far."""
    return sum(int(state.get("last_seq", 0)) for state in _stream_states(monitor_url).values())


def stream_bytes(monitor_url: str, stream: str) -> int:
    """The bytes a stream holds now."""
    return int(_stream_states(monitor_url).get(stream, {}).get("bytes", 0))


@dataclass
class System:
    server: EmbeddedNats
    base: Path
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    creds: LocalCreds | None = None
    """Auth on: each process's credential, and the admin's for the bench's own clients."""
    tls_ca: str | None = None

    @property
    def identity(self) -> Identity:
        """How the bench's own clients connect (the admin's credential when auth is on)."""
        return Identity(creds=str(self.creds.admin) if self.creds else None, tls_ca=self.tls_ca)

    @property
    def url(self) -> str:
        return self.server.url

    def env(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("JETCRON_")}
        env.update(
            JETCRON_NATS_URL=self.server.url,
            JETCRON_NATS_MONITOR_URL=self.server.monitor_url,
            JETCRON_DATA_DIR=str(self.base),
            PYTHONUNBUFFERED="1",
        )
        if not self.server.sync_always:
            env["JETCRON_ALLOW_UNSAFE_STORAGE"] = "true"
        if self.tls_ca:
            env["JETCRON_NATS_TLS_CA"] = self.tls_ca
        env.update(extra)
        return env

    def start(self, name: str, module: str, **extra: str) -> subprocess.Popen[bytes]:
        log = (self.base / f"{name}.log").open("ab")
        own = self.creds.env(name) if self.creds else {}
        proc = subprocess.Popen(
            [sys.executable, "-m", f"jetcron_services.{module}"],
            env=self.env(**own, **extra),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        self.procs[name] = proc
        return proc

    def wait_ready(self, timeout: float = 30.0) -> None:
        """Every started service logged its ready line."""
        deadline = time.monotonic() + timeout
        for name in self.procs:
            path = self.base / f"{name}.log"
            while "ready" not in path.read_text(errors="replace") and "leader" not in path.read_text(errors="replace"):
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{name} not ready: {path.read_text()[-2000:]}")
                time.sleep(0.05)

    def kill(self, name: str) -> None:
        proc = self.procs[name]
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()

    def stop(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        for proc in self.procs.values():
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


@contextmanager
def system(
    *,
    sync_always: bool,
    agents: int = 0,
    sim: bool = False,
    services: tuple[str, ...] = ("api", "trigger", "placement", "run_tracker"),
    agent_env: dict[str, str] | None = None,
    auth: bool = False,
    tls: bool = False,
    **settings: str,
) -> Iterator[System]:
    """A whole jetcron on loopback in a temp dir: server, services, agents; stopped and removed after."""
    # A bench stopped by SIGTERM (a timeout) must still stop what it started: make it unwind.
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    with tempfile.TemporaryDirectory(prefix="jetcron-bench-") as tmp:
        base = Path(tmp)
        creds = LocalCreds.ensure(base / "auth", agents) if auth else None
        certs = ensure_local_tls(base / "tls") if tls else None
        server = EmbeddedNats(base / "nats", sync_always=sync_always,
                              extra_config=creds.authority.server_config() if creds else "", tls=certs)
        server.start()
        sys_ = System(server=server, base=base, creds=creds, tls_ca=str(certs.ca) if certs else None)
        try:
            for name in services:
                sys_.start(name, name, **settings)
            for i in range(agents):
                env = {"JETCRON_AGENT_ID": f"agent-{i + 1}", "JETCRON_AGENT_SIM": "true" if sim else "false",
                       "JETCRON_AGENT_SLOTS": "512", "JETCRON_AGENT_CPU": "1000", "JETCRON_AGENT_MEMORY_MB": "10000000"}
                sys_.start(f"agent-{i + 1}", "agent", **{**env, **(agent_env or {}), **settings})
            sys_.wait_ready()
            yield sys_
        finally:
            sys_.stop()
            server.stop()
            _keep_logs(base)


def _keep_logs(base: Path) -> None:
    """Copy the service and server logs out of the temp dir when JETCRON_BENCH_LOGS names a folder: a slow
    repetition can then be read afterwards (who lost a lease, what timed out)."""
    keep = os.environ.get("JETCRON_BENCH_LOGS")
    if not keep:
        return
    dest = Path(keep) / base.name
    for log in base.rglob("*.log"):
        target = dest / log.relative_to(base)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(log, target)


@contextmanager
def stage_processes(module: str, names: tuple[str, ...] | list[str], url: str, runs: int
                    ) -> Iterator[list[subprocess.Popen[str]]]:
    """`python -m module --stage NAME --url URL --runs RUNS` for each name, each ready (its first line says so)
    before this yields them; any still running at the end is killed."""
    procs = [subprocess.Popen([sys.executable, "-m", module, "--stage", name, "--url", url, "--runs", str(runs)],
                              cwd=ROOT, stdout=subprocess.PIPE, text=True) for name in names]
    try:
        for proc in procs:
            assert proc.stdout is not None and proc.stdout.readline().strip() == "ready", "a stage did not start"
        yield procs
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def emit(result: dict[str, Any]) -> None:
    """One JSON line on stdout per result (machine-readable); `bench.run` stores it under bench/results/."""
    # This machine is shared: say how busy it was (the figures are only as good as this).
    result.setdefault("machine", {"cpus": os.cpu_count(), "load_avg_1m_at_end": round(os.getloadavg()[0], 1)})
    print(json.dumps(result, sort_keys=True), flush=True)


async def submit_now_jobs(client: Any, prefix: str, count: int, command: list[str], *, concurrency: int) -> None:
    """`count` one-shot jobs named `<prefix><i>`, due now, each asking almost nothing of its agent, through the API,
    at most `concurrency` requests at once."""
    gate = asyncio.Semaphore(concurrency)

    async def submit(i: int) -> None:
        async with gate:
            await client.call("jobs.create", {"spec": {"name": f"{prefix}{i}", "command": command,
                                                       "resources": {"cpu": 0.001, "memory_mb": 1}}})

    await asyncio.gather(*(submit(i) for i in range(count)))

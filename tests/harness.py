"""Test harness: service processes, process-tree checks and polling helpers (imported by tests and conftests)."""

from __future__ import annotations

import asyncio
import inspect
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import forkserver
import pytest

from jetcron.auth.authority import Authority
from jetcron.auth.roles import Role
from jetcron.bus.server import EmbeddedNats

# Short leases and heartbeats so failover happens in seconds, not the production tens of seconds.
FAST_SETTINGS = {
    "JETCRON_RUN_LEASE_TTL": "3",
    "JETCRON_LEADER_LEASE_TTL": "2",
    "JETCRON_HEARTBEAT": "0.5",
    "JETCRON_ASSIGN_STALL": "5",
    "JETCRON_REDRIVE_AFTER": "5",
    "JETCRON_KILL_GRACE": "1",
    "JETCRON_DRAIN_GRACE": "2",
    # Jobs of most tests write into pytest's tmp dirs (mode 0700, root's): run them as the agent's user. The
    # default, an unprivileged user, is what test_agent_confinement.py and the e2e test of `jetcron up` run.
    "JETCRON_AGENT_JOB_USER": "@agent",
}
CORE_SERVICES = ("api", "trigger", "placement", "run_tracker")

# Whatever a test wants shown when it fails (service logs, server logs): name -> callable returning text.
FAILURE_REPORTS = pytest.StashKey[dict[str, Callable[[], str]]]()


def add_failure_report(request: pytest.FixtureRequest, name: str, report: Callable[[], str]) -> None:
    request.node.stash.setdefault(FAILURE_REPORTS, {})[name] = report


TEST_CONFIG_HOME = tempfile.mkdtemp(prefix="jetcron-test-config-")


def clean_env(**extra: str) -> dict[str, str]:
    """The test process's environment without any JETCRON_* a developer's shell may carry."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("JETCRON_")}
    env["PYTHONUNBUFFERED"] = "1"  # log lines reach the file as they happen (readiness waits read them)
    # `jetcron up` remembers its system for the CLI there: a test's never lands in the developer's ~/.config,
    # and the developer's never steers a test's CLI.
    env["XDG_CONFIG_HOME"] = TEST_CONFIG_HOME
    env.update(extra)
    return env


JETCRON = str(Path(sys.executable).parent / "jetcron")


def mint(authority: Authority, path: Path, role: Role, **who: str) -> str:
    """A credential of `role` written to `path`; its path, for JETCRON_NATS_CREDS or --creds."""
    authority.write_creds(path, role, **who)
    return str(path)


def run_cli(url: str | None, *args: str) -> subprocess.CompletedProcess[str]:
    """`jetcron [--nats URL] ARGS...` as a user types it; a wide terminal, so table cells are not wrapped."""
    server = ["--nats", url] if url else []
    return subprocess.run([JETCRON, *server, *args], capture_output=True, text=True, timeout=30,
                          env=clean_env(COLUMNS="400"), check=False)


def service_env(server: EmbeddedNats, data_dir: Path, **extra: str) -> dict[str, str]:
    """What every service of a test gets: the server (and its monitor, for the fsync check) and fast settings."""
    return clean_env(JETCRON_NATS_URL=server.url, JETCRON_NATS_MONITOR_URL=server.monitor_url,
                     JETCRON_DATA_DIR=str(data_dir), **FAST_SETTINGS, **extra)


# --- polling ---------------------------------------------------------------------------------------

async def wait_for(predicate: Callable[[], Any], timeout: float = 15.0, *, interval: float = 0.1,
                   what: str = "", ignore: tuple[type[BaseException], ...] = ()) -> Any:
    """Poll `predicate` (sync or async) until it returns something truthy; return that, or fail saying what."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        try:
            last = predicate()
            if inspect.isawaitable(last):
                last = await last
        except ignore as exc:
            last = exc
        else:
            if last:
                return last
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what or predicate}; last: {last!r}")
        await asyncio.sleep(interval)


def wait_until(predicate: Callable[[], Any], timeout: float = 15.0, *, interval: float = 0.1,
               what: str = "", ignore: tuple[type[BaseException], ...] = ()) -> Any:
    """The same for synchronous tests (subprocess-driven e2e)."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        try:
            last = predicate()
        except ignore as exc:
            last = exc
        else:
            if last:
                return last
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what or predicate}; last: {last!r}")
        time.sleep(interval)


# --- processes -------------------------------------------------------------------------------------

def _stat(pid: int) -> list[str] | None:
    """Fields of /proc/<pid>/stat after the command name (which may contain spaces), or None if gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2:].split()


def start_time(pid: int) -> int | None:
    fields = _stat(pid)
    return int(fields[19]) if fields else None  # field 22 of stat: start time in clock ticks since boot


def pid_alive(pid: int, started: int | None = None) -> bool:
    """Running (a zombie counts as gone; `started` guards against a reused pid)."""
    fields = _stat(pid)
    if fields is None or fields[0] in ("Z", "X"):
        return False
    return started is None or int(fields[19]) == started


def children(pid: int) -> list[int]:
    """The children of `pid`'s threads; none once it is gone (it may go while its threads are read)."""
    found: list[int] = []
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return found
    for task in tasks:
        try:
            found += [int(p) for p in (task / "children").read_text().split()]
        except OSError:
            continue
    return found


def descendants(pid: int) -> dict[int, int]:
    """Every live process below `pid`, as pid -> start time (to tell a reused pid later)."""
    out: dict[int, int] = {}
    todo = children(pid)
    while todo:
        p = todo.pop()
        started = start_time(p)
        if started is not None and p not in out:
            out[p] = started
            todo += children(p)
    return out


def still_running(pids: dict[int, int]) -> list[int]:
    return sorted(p for p, started in pids.items() if pid_alive(p, started))


def kill_leftovers(pids: dict[int, int]) -> None:
    """SIGKILL processes our test started indirectly that outlived their parent (by pid, start time checked)."""
    for p in still_running(pids):
        try:
            os.kill(p, signal.SIGKILL)
        except ProcessLookupError:
            pass


@dataclass
class ServiceProcess:
    """One service as a subprocess, its stdout and stderr in a log file."""

    name: str
    argv: list[str]
    env: dict[str, str]
    log_path: Path
    proc: subprocess.Popen[bytes] | forkserver.Preloaded | None = None
    seen: dict[int, int] = field(default_factory=dict)
    """Descendants noticed so far (agents spawn reapers and jobs); killed at teardown if they outlive us."""

    def start(self) -> ServiceProcess:
        if forkserver.enabled() and self.argv[:2] == [sys.executable, "-m"]:
            # The same service in a process of its own, forked from one that has imported it (tests/preloader.py)
            self.proc = forkserver.ForkServer.get(clean_env()).start(self.argv[2], self.env, self.log_path)
            return self
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(self.argv, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                         start_new_session=True)
        return self

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def output(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def note_descendants(self) -> None:
        if self.alive:
            self.seen.update(descendants(self.pid))

    def terminate(self) -> None:
        """Send SIGTERM (a graceful stop: the service drains); see finish()."""
        if self.alive:
            assert self.proc is not None
            self.note_descendants()
            self.proc.send_signal(signal.SIGTERM)

    def finish(self, timeout: float = 15.0) -> int | None:
        """Wait for the exit, SIGKILL if it takes longer; then kill what it left behind. Returns the exit code."""
        if self.proc is None:
            return None
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=timeout)
        kill_leftovers(self.seen)
        return self.proc.returncode

    def stop(self, timeout: float = 15.0) -> int | None:
        """SIGTERM, wait, then SIGKILL."""
        self.terminate()
        return self.finish(timeout)

    def kill9(self) -> None:
        """Die at once, no cleanup: what a crash or an OOM kill does."""
        assert self.proc is not None
        self.note_descendants()
        self.proc.kill()
        self.proc.wait(timeout=10)

    def wait_exit(self, timeout: float) -> int:
        assert self.proc is not None
        return self.proc.wait(timeout=timeout)

    async def wait_logged(self, text: str, timeout: float = 15.0) -> None:
        """Wait for a log line (a readiness signal the service prints itself); fail early if it died."""

        def logged() -> bool:
            if text in self.output():
                return True
            if not self.alive:
                raise AssertionError(f"{self.name} exited with {self.proc and self.proc.returncode} before "
                                     f"logging {text!r}:\n{self.output()[-3000:]}")
            return False

        await wait_for(logged, timeout, what=f"{self.name} to log {text!r}")


class Services:
    """The services of one test, started against one NATS URL; everything stopped at teardown."""

    def __init__(self, server: EmbeddedNats, log_dir: Path, data_dir: Path,
                 identity: Callable[[str, str], dict[str, str]] | None = None) -> None:
        self.server = server
        self.log_dir = log_dir
        self.env = service_env(server, data_dir)
        self.identity = identity
        """(process name, module) -> the env that gives it its own credential (servers with auth on)."""
        self.procs: dict[str, ServiceProcess] = {}

    def start(self, name: str, module: str, **extra_env: str) -> ServiceProcess:
        """`python -m jetcron_services.<module>` under a unique name (e.g. agent-1)."""
        assert name not in self.procs, f"service {name} already started"
        own = self.identity(name, module) if self.identity else {}
        proc = ServiceProcess(name, [sys.executable, "-m", f"jetcron_services.{module}"],
                              {**self.env, **own, **extra_env}, self.log_dir / f"{name}.log").start()
        self.procs[name] = proc
        return proc

    def __getitem__(self, name: str) -> ServiceProcess:
        return self.procs[name]

    async def start_system(self, *, agents: int = 2, triggers: int = 1, core: Iterable[str] = CORE_SERVICES,
                           **env: str) -> None:
        """The usual set: api, trigger(s), placement, run_tracker and N agents, each waited for until ready;
        `env` (JETCRON_* settings) goes to every one of them."""
        core = list(core)
        ready = {"api": "api ready", "placement": "placement leader", "run_tracker": "run tracker ready",
                 "notifier": "notifier ready"}
        for name in core:
            if name == "trigger":
                for i in range(1, triggers + 1):
                    # The trigger uses JETCRON_AGENT_ID as its replica id: stable names make leases readable.
                    self.start(f"trigger-{i}", "trigger", JETCRON_AGENT_ID=f"trigger-{i}", **env)
            else:
                self.start(name, name, **env)
        for i in range(1, agents + 1):
            self.start(f"agent-{i}", "agent", JETCRON_AGENT_ID=f"agent-{i}", **env)
        waits: list[Awaitable[None]] = [self.procs[n].wait_logged(ready[n], 30) for n in core if n in ready]
        waits += [self.procs[f"trigger-{i}"].wait_logged("trigger ready", 30)
                  for i in range(1, triggers + 1) if "trigger" in core]
        waits += [self.procs[f"agent-{i}"].wait_logged("agent ready", 30) for i in range(1, agents + 1)]
        await asyncio.gather(*waits)

    def stop_all(self, timeout: float = 15.0) -> None:
        """All at once: each drains in parallel rather than one after another."""
        for proc in self.procs.values():
            proc.terminate()
        deadline = time.monotonic() + timeout
        for proc in self.procs.values():
            proc.finish(max(0.1, deadline - time.monotonic()))

    def report(self, tail_lines: int = 60) -> str:
        parts = []
        for proc in self.procs.values():
            lines = proc.output().splitlines()[-tail_lines:]
            state = "running" if proc.alive else f"exit {proc.proc and proc.proc.returncode}"
            parts.append(f"----- {proc.name} ({state}) {proc.log_path}\n" + "\n".join(lines))
        return "\n".join(parts)


def services_on(request: pytest.FixtureRequest, server: EmbeddedNats, tmp_path: Path,
                identity: Callable[[str, str], dict[str, str]] | None = None) -> Iterator[Services]:
    """A Services harness on `server`, logs attached to a failing test's report, all stopped after."""
    (tmp_path / "logs").mkdir()
    harness = Services(server, tmp_path / "logs", tmp_path / "data", identity)
    add_failure_report(request, "service logs", harness.report)
    try:
        yield harness
    finally:
        harness.stop_all()

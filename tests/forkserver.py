"""The test side of tests/preloader.py: one preloader per test process, and a handle on each service it starts
that answers as subprocess.Popen does (pid, poll, wait, returncode, send_signal, kill).

The services are the same code in processes of their own; only how their interpreter got its imports differs.
`make chaos` starts them the plain way (JETCRON_TEST_PRELOAD=0): its faults and figures are measured on
processes started as an operator starts them."""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import IO

PRELOADER = Path(__file__).with_name("preloader.py")


def enabled() -> bool:
    return os.environ.get("JETCRON_TEST_PRELOAD", "1") != "0"


class ForkServer:
    """The preloader and what it has said: the pid of each start, the exit code of each child."""

    _one: ForkServer | None = None

    def __init__(self, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen([sys.executable, str(PRELOADER)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, env=env, start_new_session=True)
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.stdin: IO[bytes] = self.proc.stdin
        self.ids = itertools.count(1)
        self.changed = threading.Condition()
        self.pids: dict[int, int] = {}
        self.exits: dict[int, int] = {}
        self.reader = threading.Thread(target=self._read, args=(self.proc.stdout,), daemon=True)
        self.reader.start()

    @classmethod
    def get(cls, env: dict[str, str]) -> ForkServer:
        """This process's preloader, started on first use (`env`: its environment, the services' minus their
        own settings)."""
        if cls._one is None or cls._one.proc.poll() is not None:
            cls._one = ForkServer(env)
        return cls._one

    def _read(self, out: IO[bytes]) -> None:
        for line in out:
            message = json.loads(line)
            with self.changed:
                if "started" in message:
                    self.pids[message["started"]] = message["pid"]
                else:
                    self.exits[message["exited"]] = message["code"]
                self.changed.notify_all()
        with self.changed:
            self.changed.notify_all()

    def start(self, module: str, env: dict[str, str], log: Path) -> Preloaded:
        request = next(self.ids)
        self.stdin.write((json.dumps({"id": request, "module": module, "env": env, "log": str(log)}) + "\n").encode())
        self.stdin.flush()
        with self.changed:
            if not self.changed.wait_for(lambda: request in self.pids or self.proc.poll() is not None, 30):
                raise RuntimeError(f"the preloader did not start {module} within 30 s")
            if request not in self.pids:
                raise RuntimeError(f"the preloader exited ({self.proc.returncode}) before starting {module}")
            return Preloaded(self, self.pids.pop(request))

    def wait(self, pid: int, timeout: float | None) -> int:
        with self.changed:
            if not self.changed.wait_for(lambda: pid in self.exits, timeout):
                raise subprocess.TimeoutExpired(f"pid {pid}", timeout or 0)
            return self.exits[pid]

    def returncode(self, pid: int) -> int | None:
        with self.changed:
            return self.exits.get(pid)


class Preloaded:
    """A service the preloader started, as the harness uses a subprocess.Popen."""

    def __init__(self, server: ForkServer, pid: int) -> None:
        self.server = server
        self.pid = pid

    @property
    def returncode(self) -> int | None:
        return self.server.returncode(self.pid)

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        return self.server.wait(self.pid, timeout)

    def send_signal(self, sig: int) -> None:
        if self.returncode is None:
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                pass

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

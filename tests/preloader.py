"""Starts the tests' service processes from an interpreter that has already imported them (tests/forkserver.py).

A service started as `python -m jetcron_services.<name>` spends about 0.45 CPU-seconds importing jetcron and its
libraries before it does anything, and the suite starts several hundred. This process imports them once, then
for each request forks: the child is a process of its own (its own pid, session, environment, log file and
connections, nothing shared at run time), which then runs the service's `__main__` exactly as `-m` would.

Protocol, one JSON object per line: in, {"id", "module", "env", "log"}; out, {"started": id, "pid"} and, when a
child ends, {"exited": pid, "code"} (a negative code: the signal that ended it, as subprocess reports it). The
process ends when its input closes. It is single-threaded, so a fork never copies a lock held by another thread.
"""

from __future__ import annotations

import importlib
import io
import json
import os
import runpy
import select
import signal
import sys

PRELOAD = ("jetcron_services.api.service", "jetcron_services.trigger.service", "jetcron_services.placement.service",
           "jetcron_services.run_tracker.service", "jetcron_services.agent.service",
           "jetcron_services.notifier.service", "jetcron_services.gateway.service")


def send(message: dict[str, object]) -> None:
    os.write(1, (json.dumps(message) + "\n").encode())


def reap() -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        send({"exited": pid, "code": os.waitstatus_to_exitcode(status)})


def become(request: dict[str, object], wake: tuple[int, int]) -> None:
    """In the child: the service's own session, stdio and environment, then its `__main__`. Returns only by
    raising SystemExit (or the service's own error), which ends this interpreter as `python -m` would end."""
    os.setsid()
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    for fd in wake:
        os.close(fd)
    log = os.open(str(request["log"]), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)
    os.close(null)
    env = request["env"]
    assert isinstance(env, dict)
    os.environ.clear()
    os.environ.update(env)
    # The objects over fds 1 and 2 were made for this process's pipe: write through to the log, as
    # PYTHONUNBUFFERED makes a started interpreter do.
    sys.stdin = open(0, closefd=False)  # noqa: SIM115
    sys.stdout, sys.stderr = (io.TextIOWrapper(open(fd, "wb", buffering=0, closefd=False),  # noqa: SIM115
                                               encoding="utf-8", line_buffering=True, write_through=True)
                              for fd in (1, 2))
    from jetcron import faults

    faults.configure(os.environ.get("JETCRON_FAULT", ""))  # read at import, before this child had its env
    module = str(request["module"])
    sys.argv = [module]
    runpy.run_module(module, run_name="__main__", alter_sys=True)
    raise SystemExit(0)


def main() -> None:
    for name in PRELOAD:
        importlib.import_module(name)
    wake = os.pipe()
    for fd in wake:
        os.set_blocking(fd, False)
    signal.set_wakeup_fd(wake[1])
    signal.signal(signal.SIGCHLD, lambda *_: None)
    pending = b""
    while True:
        ready, _, _ = select.select([0, wake[0]], [], [])
        if wake[0] in ready:
            while True:
                try:
                    if not os.read(wake[0], 512):
                        break
                except BlockingIOError:
                    break
            reap()
        if 0 in ready:
            data = os.read(0, 65536)
            if not data:
                return
            pending += data
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                request = json.loads(line)
                pid = os.fork()
                if pid == 0:
                    become(request, wake)
                send({"started": request["id"], "pid": pid})


if __name__ == "__main__":
    main()

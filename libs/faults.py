"""Fault points for chaos tests: JETCRON_FAULT=POINT=ACTION makes a process misbehave at a named line."""

from __future__ import annotations

import os
import signal
import time

_spec = os.environ.get("JETCRON_FAULT", "")
_points = dict(item.split("=", 1) for item in _spec.split(",") if "=" in item)


def point(name: str) -> None:
    """exit: die at once like kill -9 (no cleanup); stop: SIGSTOP ourselves; sleepN: pause N seconds."""
    action = _points.get(name)
    if action is None:
        return
    if action == "exit":
        os._exit(137)
    if action == "stop":
        os.kill(os.getpid(), signal.SIGSTOP)
    if action.startswith("sleep"):
        time.sleep(float(action[5:] or 1))

"""The GPU health check: run now and then on GPU hosts; its result travels in every heartbeat."""

from __future__ import annotations

import asyncio
import contextlib
import shlex
from datetime import datetime
from typing import Protocol

import msgspec
import structlog

from jetcron.config import Settings
from jetcron.core.clock import Clock
from jetcron.core.models import AgentInfo
from jetcron_services.agent.host.offer import discover_gpus

TIMEOUT = 30.0
DETAIL = 200


class GpuHealthPorts(Protocol):
    settings: Settings
    clock: Clock
    log: structlog.stdlib.BoundLogger
    stop: asyncio.Event


class GpuHealth:
    """The last check's result; placement keeps a host that came back from missing heartbeats off GPU
    work until a pass newer than its loss shows up here."""

    def __init__(self, ctx: GpuHealthPorts, gpus: int) -> None:
        self.ctx = ctx
        self.gpus = gpus
        self.ok: bool | None = None
        self.at: datetime | None = None
        self.detail = ""

    def stamp(self, info: AgentInfo) -> AgentInfo:
        if self.ok is None:
            return info
        return msgspec.structs.replace(info, gpu_health_ok=self.ok, gpu_health_at=self.at,
                                       gpu_health_detail=self.detail)

    async def check(self) -> None:
        command = self.ctx.settings.gpu_health_check
        at = self.ctx.clock.now()
        if command:
            ok, detail = await _run(shlex.split(command))
        else:
            count = (await asyncio.to_thread(discover_gpus))[0]
            ok, detail = count == self.gpus, "" if count == self.gpus else f"NVML sees {count} of {self.gpus} GPUs"
        if not ok and self.ok is not False:
            self.ctx.log.warning("GPU health check failed", detail=detail)
        self.ok, self.at, self.detail = ok, at, detail

    async def loop(self) -> None:
        if self.gpus <= 0:
            return
        while not self.ctx.stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.ctx.stop.wait(), timeout=self.ctx.settings.gpu_health_every)
            if not self.ctx.stop.is_set():
                await self.check()


async def _run(argv: list[str]) -> tuple[bool, str]:
    """Exit 0 within the timeout passes; the output's tail explains a failure."""
    try:
        proc = await asyncio.create_subprocess_exec(*argv, stdin=asyncio.subprocess.DEVNULL,
                                                    stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
                                                    start_new_session=True)
    except OSError as exc:
        return False, f"could not run {argv[0]!r}: {exc.strerror or exc}"
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), timeout=TIMEOUT)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await proc.wait()
        return False, f"{argv[0]} did not finish within {TIMEOUT:g}s"
    text = out.decode("utf-8", "replace").strip()[-DETAIL:]
    if proc.returncode == 0:
        return True, ""
    return False, f"{argv[0]} exited {proc.returncode}" + (f": {text}" if text else "")

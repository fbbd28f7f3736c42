"""A webhook receiver on loopback for the notification benchmark and tests: records each POST, answers the
status it is told to."""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes
    at: float
    """time.time() when the body was read."""
    ok: bool
    """Whether it was answered with a 2xx."""

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Receiver:
    status: int = 200
    received: list[Received] = field(default_factory=list)
    server: asyncio.Server | None = None
    port: int = 0
    handlers: dict[asyncio.Task[None], asyncio.StreamWriter] = field(default_factory=dict)

    async def start(self) -> Receiver:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    def url(self, path: str = "/hook") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    async def close(self) -> None:
        if self.server is not None:
            self.server.close()
            for writer in self.handlers.values():  # keep-alive connections left open: end them (not cancel:
                writer.transport.abort()               # 3.11's streams report a cancelled handler as an error)
            await asyncio.gather(*self.handlers, return_exceptions=True)
            await self.server.wait_closed()

    def events(self, event: str) -> list[Received]:
        return [r for r in self.received if r.headers.get("jetcron-event") == event and r.ok]

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self.handlers[task] = writer
        try:
            while True:
                line = await reader.readline()
                if not line:
                    return
                _method, path, _ = line.decode().split(" ", 2)
                headers: dict[str, str] = {}
                while (h := await reader.readline()) not in (b"\r\n", b""):
                    name, _, value = h.decode().partition(":")
                    headers[name.strip().lower()] = value.strip()
                body = await reader.readexactly(int(headers.get("content-length", "0")))
                status = self.status
                self.received.append(Received(path, headers, body, time.time(), 200 <= status < 300))
                writer.write(f"HTTP/1.1 {status} X\r\nContent-Length: 0\r\n\r\n".encode())
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError, ValueError):
            return
        finally:
            self.handlers.pop(task, None)
            writer.close()


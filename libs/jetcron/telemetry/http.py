"""Each service's HTTP port: /metrics (Prometheus text), /livez, /readyz; plain asyncio, no web framework."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Callable

from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest

from jetcron.telemetry import metrics  # noqa: F401 - every metric is served, even those this service never moves

_REASONS = {200: "OK", 404: "Not Found", 405: "Method Not Allowed", 503: "Service Unavailable"}
_READ_TIMEOUT = 5.0
_MAX_HEADER_LINES = 100

Readiness = Callable[[], str | None]
"""Returns None when ready, else why not (shown in the /readyz body)."""


def advertised_host(bind: str) -> str:
    """The host others should use: the bind address, or this host's name when bound to every interface."""
    return socket.gethostname() if bind in ("", "0.0.0.0", "::") else bind


class HealthServer:
    """Serves /metrics, /livez and /readyz on one port (0 picks a free one: several services share a host)."""

    def __init__(self, readiness: Readiness, *, host: str = "0.0.0.0", port: int = 0) -> None:
        self.readiness = readiness
        self.host = host
        self.port = port
        self._server: asyncio.Server | None = None

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._handle, self.host, self.port)
        self.port = int(self._server.sockets[0].getsockname()[1])

    @property
    def url(self) -> str:
        """Where Prometheus scrapes this instance."""
        host = advertised_host(self.host)
        return f"http://{f'[{host}]' if ':' in host else host}:{self.port}/metrics"

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await self._server.wait_closed()
            self._server = None

    def route(self, method: str, path: str) -> tuple[int, str, bytes]:
        """(status, content type, body) for one request."""
        if method not in ("GET", "HEAD"):
            return 405, "text/plain", b"GET only\n"
        path = path.split("?", 1)[0]
        if path == "/metrics":
            return 200, CONTENT_TYPE_LATEST, generate_latest(REGISTRY)
        if path == "/livez":
            return 200, "text/plain", b"ok\n"
        if path == "/readyz":
            why = self.readiness()
            return (200, "text/plain", b"ready\n") if why is None else (503, "text/plain", f"{why}\n".encode())
        return 404, "text/plain", b"try /metrics, /livez or /readyz\n"

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request = await asyncio.wait_for(reader.readline(), _READ_TIMEOUT)
            for _ in range(_MAX_HEADER_LINES):  # the headers say nothing we need; read past them
                if (await asyncio.wait_for(reader.readline(), _READ_TIMEOUT)).strip() == b"":
                    break
            parts = request.decode("latin-1").split()
            if len(parts) < 2:
                return
            status, content_type, body = self.route(parts[0], parts[1])
            head = (f"HTTP/1.1 {status} {_REASONS[status]}\r\nContent-Type: {content_type}\r\n"
                    f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode()
            writer.write(head if parts[0] == "HEAD" else head + body)
            await writer.drain()
        except (TimeoutError, ConnectionError, UnicodeDecodeError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

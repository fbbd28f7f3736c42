"""A small HTTP/1.1 keep-alive client for load: httpx spends ~4 ms of CPU per request, so a bench driven by it
measures httpx. This one writes each request as bytes and reads the reply by Content-Length (bench use only)."""

from __future__ import annotations

import asyncio
import json
from typing import Any


class Connection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, host: str,
                 headers: dict[str, str]) -> None:
        self.reader, self.writer = reader, writer
        self.head = f"Host: {host}\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items())

    @classmethod
    async def open(cls, host: str, port: int, headers: dict[str, str]) -> Connection:
        reader, writer = await asyncio.open_connection(host, port)
        return cls(reader, writer, f"{host}:{port}", headers)

    async def request(self, method: str, path: str, body: Any = None) -> tuple[int, bytes]:
        data = b"" if body is None else json.dumps(body).encode()
        extra = f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n" if body is not None else ""
        self.writer.write(f"{method} {path} HTTP/1.1\r\n{self.head}{extra}\r\n".encode() + data)
        status_line = await self.reader.readline()
        length = 0
        while (line := await self.reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.decode("latin-1").partition(":")
            if name.lower() == "content-length":
                length = int(value)
        return int(status_line.split()[1]), await self.reader.readexactly(length)

    async def close(self) -> None:
        self.writer.close()
        await self.writer.wait_closed()

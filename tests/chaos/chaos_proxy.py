"""A small asyncio TCP fault proxy (toxiproxy is not installable here): put it between one client and one NATS node.

Faults, switched at run time:
- latency (and jitter): every chunk is delivered this long after it arrived (plus or minus up to `jitter`),
  both ways, in order; chunks in flight overlap, as on a long link;
- blackhole: nothing passes either way, as in a partition; bytes are held (TCP would retransmit) and flow on
  heal(), unless the connection was reset meanwhile;
- reset: every open connection is aborted with an RST; with refuse=True new ones are refused until heal();
- drop_reply: the next N messages the server sends to the client (MSG/HMSG frames: replies, deliveries) vanish.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import socket
import struct
import time


class _ServerFrames:
    """Split the server-to-client byte stream into whole protocol frames, so one can be dropped cleanly."""

    def __init__(self) -> None:
        self.buf = bytearray()

    def feed(self, data: bytes) -> list[tuple[bool, bytes]]:
        """(is_message, frame) for every complete frame buffered so far."""
        self.buf += data
        frames: list[tuple[bool, bytes]] = []
        while True:
            end = self.buf.find(b"\r\n")
            if end < 0:
                return frames
            line = bytes(self.buf[:end])
            op = line.split(b" ", 1)[0].upper()
            size = end + 2
            if op in (b"MSG", b"HMSG"):
                size += int(line.split()[-1]) + 2  # the last field is the total payload size
                if len(self.buf) < size:
                    return frames
            frames.append((op in (b"MSG", b"HMSG"), bytes(self.buf[:size])))
            del self.buf[:size]


class FaultProxy:
    def __init__(self, upstream_port: int, upstream_host: str = "127.0.0.1", *, parse_frames: bool = True) -> None:
        self.upstream = (upstream_host, upstream_port)
        self.parse_frames = parse_frames
        """False between two NATS nodes: route frames are not a client's (drop_reply does not apply there)."""
        self.latency = 0.0
        self.jitter = 0.0
        self.rng = random.Random(0)
        self.drop_replies = 0
        self.dropped = 0
        self.refusing = False
        self._open = asyncio.Event()
        self._open.set()
        self._server: asyncio.Server | None = None
        self._links: set[tuple[asyncio.StreamWriter, asyncio.StreamWriter]] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self.port = 0

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    async def start(self) -> FaultProxy:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    def blackhole(self) -> None:
        self._open.clear()

    def heal(self) -> None:
        self.refusing = False
        self.latency = self.jitter = 0.0
        self._open.set()

    def drop_reply(self, n: int = 1) -> None:
        self.drop_replies += n

    def reset(self, *, refuse: bool = False) -> int:
        """RST every open connection; how many there were."""
        self.refusing = refuse
        links = list(self._links)
        for pair in links:
            for writer in pair:
                _abort(writer)
        self._links.clear()
        return len(links)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        self.reset()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.refusing:
            _abort(writer)
            return
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        except OSError:
            _abort(writer)
            return
        pair = (writer, up_writer)
        self._links.add(pair)
        to_server = asyncio.create_task(self._pump(reader, up_writer, frames=None))
        frames = _ServerFrames() if self.parse_frames else None
        to_client = asyncio.create_task(self._pump(up_reader, writer, frames=frames))
        for task in (to_server, to_client):
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        await asyncio.wait([to_server, to_client], return_when=asyncio.FIRST_COMPLETED)
        self._links.discard(pair)
        for w in pair:
            with contextlib.suppress(Exception):
                w.close()

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                    frames: _ServerFrames | None) -> None:
        queue: asyncio.Queue[tuple[float, bytes] | None] = asyncio.Queue()
        sender = asyncio.create_task(self._send(queue, writer, frames))
        last = 0.0
        with contextlib.suppress(ConnectionError, OSError, asyncio.IncompleteReadError):
            while not sender.done():
                data = await reader.read(65536)
                if not data:
                    break
                await self._open.wait()  # a blackhole holds the bytes here
                delay = self.latency + (self.rng.uniform(-self.jitter, self.jitter) if self.jitter else 0.0)
                last = max(last, time.monotonic() + max(0.0, delay))  # jitter never reorders bytes
                queue.put_nowait((last, data))
        queue.put_nowait(None)
        with contextlib.suppress(Exception):
            await sender

    async def _send(self, queue: asyncio.Queue[tuple[float, bytes] | None], writer: asyncio.StreamWriter,
                    frames: _ServerFrames | None) -> None:
        with contextlib.suppress(ConnectionError, OSError):
            while (item := await queue.get()) is not None:
                at, data = item
                if (wait := at - time.monotonic()) > 0:
                    await asyncio.sleep(wait)
                if frames is not None:
                    data = b"".join(self._keep(frames.feed(data)))
                if data:
                    writer.write(data)
                    await writer.drain()
        with contextlib.suppress(Exception):
            writer.close()

    def _keep(self, frames: list[tuple[bool, bytes]]) -> list[bytes]:
        kept = []
        for is_message, frame in frames:
            if is_message and self.drop_replies > 0:
                self.drop_replies -= 1
                self.dropped += 1
                continue
            kept.append(frame)
        return kept


def _abort(writer: asyncio.StreamWriter) -> None:
    """Close with an RST (SO_LINGER 0), as a crashed peer or a middlebox reset does."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()

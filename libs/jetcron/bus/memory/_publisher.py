"""The twin of ports.Publisher: what was published, in a list, and routed to queues and streams."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from jetcron.bus.memory._match import subject_matches
from jetcron.bus.memory._queue import MemoryQueue
from jetcron.bus.memory._streams import MemoryStreams
from jetcron.wire.codec import encode


@dataclass(frozen=True)
class Published:
    subject: str
    data: bytes
    headers: dict[str, str] | None
    msg_id: str | None
    ttl: int | None


class MemoryPublisher:
    """ports.Publisher in a list: every message stored once per message id (the server's duplicate window, here
    without an end), in order; a subject routed to a MemoryQueue (`route`) is delivered there too, as a stream's
    consumer would take it. Trace headers are not added: no span crosses a twin."""

    def __init__(self, streams: MemoryStreams | None = None) -> None:
        self.published: list[Published] = []
        self._ids: dict[str, int] = {}
        self._routes: list[tuple[str, MemoryQueue]] = []
        self.streams = streams
        """Where a message whose subject a declared stream takes is stored too (its sequence is then the stream's,
        and an expected last sequence in its headers is checked): None, a list only."""

    def route(self, pattern: str, queue: MemoryQueue) -> None:
        self._routes.append((pattern, queue))

    def on(self, pattern: str) -> list[Published]:
        """What was published on subjects matching `pattern`, in order."""
        return [p for p in self.published if subject_matches(pattern, p.subject)]

    async def publish(self, subject: str, message: Any, *, msg_id: str | None = None,
                      headers: dict[str, str] | None = None, ttl: int | None = None) -> int:
        if msg_id is not None and msg_id in self._ids:
            return self._ids[msg_id]
        data = message if isinstance(message, bytes) else encode(message)
        seq = len(self.published) + 1
        if self.streams is not None and self.streams.stream_of(subject) is not None:
            seq = self.streams.store(subject, data, headers)
        self.published.append(Published(subject, data, dict(headers) if headers else None, msg_id, ttl))
        if msg_id is not None:
            self._ids[msg_id] = seq
        for pattern, queue in self._routes:
            if subject_matches(pattern, subject):
                await queue.publish(subject, data, headers=headers, msg_id=msg_id)
        return seq

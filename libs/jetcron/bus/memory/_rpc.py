"""The twin of ports.Rpc: requests and notices delivered to handlers in one process."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from jetcron.bus.memory._match import subject_matches
from jetcron.bus.memory._queue import MemoryMessage
from jetcron.bus.ports import Endpoint, Handler
from jetcron.bus.rpc import NoAnswer


class _Served:
    def __init__(self, rpc: MemoryRpc, subject: str, queue: str, handler: Handler) -> None:
        self.rpc, self.subject, self.queue, self.handler = rpc, subject, queue, handler

    async def unsubscribe(self) -> None:
        if self in self.rpc.served:
            self.rpc.served.remove(self)


class MemoryRpc:
    """ports.Rpc in one process: a request goes to one handler serving its subject (one per queue group, the first
    served), a notice to every plain subscriber and one member of each group; handlers run at once, in the
    caller's task. A request nobody serves has no responders; one whose handler does not answer within the
    timeout has no answer."""

    def __init__(self) -> None:
        self.served: list[_Served] = []
        """What is served now, in the order it was served."""
        self.notices: list[tuple[str, bytes]] = []
        """Every one-way message sent, in order (delivered or not)."""
        self.up = True

    def _takers(self, subject: str) -> list[_Served]:
        takers: list[_Served] = []
        groups: set[str] = set()
        for served in self.served:
            if not subject_matches(served.subject, subject):
                continue
            if served.queue:
                if served.queue in groups:
                    continue
                groups.add(served.queue)
            takers.append(served)
        return takers

    async def request(self, subject: str, data: bytes, *, timeout: float,
                      headers: dict[str, str] | None = None) -> MemoryMessage:
        takers = self._takers(subject)
        if not takers:
            raise NoAnswer(f"{subject}: no responders", responders=False)
        msg = MemoryMessage(subject, data, dict(headers) if headers else None)
        deadline = asyncio.get_running_loop().time() + timeout
        try:
            await asyncio.wait_for(takers[0].handler(msg), timeout)
            if not msg.responded.is_set():
                await asyncio.wait_for(msg.responded.wait(), max(0.0, deadline - asyncio.get_running_loop().time()))
        except TimeoutError:
            pass
        if not msg.responses:
            raise NoAnswer(f"{subject}: no answer within {timeout:g}s", responders=True)
        return MemoryMessage(subject, msg.responses[0])

    async def serve(self, subject: str, handler: Handler, *, queue: str = "", flush: bool = False) -> _Served:
        served = _Served(self, subject, queue, handler)
        self.served.append(served)
        return served

    async def notify(self, subject: str, data: bytes) -> None:
        self.notices.append((subject, data))
        for served in self._takers(subject):
            await served.handler(MemoryMessage(subject, data))

    async def flush(self) -> None:
        return None

    @property
    def connected(self) -> bool:
        """The twin has no connection to lose: a test sets this to play one that is down."""
        return self.up

    async def endpoints(self, *, name: str, version: str, description: str, queue: str,
                        endpoints: Sequence[Endpoint]) -> _Endpoints:
        return _Endpoints([await self.serve(subject, handler, queue=queue) for _name, subject, handler in endpoints])


class _Endpoints:
    def __init__(self, served: list[_Served]) -> None:
        self.served = served

    async def stop(self) -> None:
        for served in self.served:
            await served.unsubscribe()

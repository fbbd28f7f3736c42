"""The run tracker's leader keeps its lease through a sweep that the storage slows past the lease's TTL, and
through a sweep that fails: its renewals run beside the sweeps, and a failed round is logged and tried again.
On the lease log's twin, with a stand-in for the server that lapses a lease not renewed within its TTL."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime
from typing import Any, cast

from twin_support import twin_context

from jetcron.bus.memory import MemoryLeaseLog
from jetcron.config import Settings
from jetcron.core.errors import Unavailable
from jetcron.wire import subjects as s
from jetcron_services.run_tracker.service import reconcile_as_leader

TTL = 1.5


class Server(MemoryLeaseLog):
    """The lease log's twin, and the server's TTL judged on the wall clock: a lease not written again within its
    TTL lapses."""

    def __init__(self) -> None:
        super().__init__(clock=lambda: datetime.now(UTC))
        self.written_at: dict[str, float] = {}

    async def write(self, key: str, writer: str, data: bytes, ttl: float, expected: int | None) -> int:
        revision = await super().write(key, writer, data, ttl, expected)
        self.written_at[key] = time.monotonic()
        return revision

    async def judge(self) -> None:
        while True:
            for key, at in list(self.written_at.items()):
                if time.monotonic() - at > TTL:
                    self.expire(key)
                    del self.written_at[key]
            await asyncio.sleep(0.05)


class Reconciler:
    """Sweeps as the storage lets them: the first takes longer than the lease's TTL, the second fails."""

    def __init__(self) -> None:
        self.synced = asyncio.Event()
        self.synced.set()
        self.active: dict[str, Any] = {}
        self.rounds = 0

    async def sweep(self, now: datetime) -> None:
        self.rounds += 1
        if self.rounds == 1:
            await asyncio.sleep(TTL * 1.6)
        elif self.rounds == 2:
            raise Unavailable("storage did not answer (TimeoutError); outcome unknown, retry")


class Idle:
    """The leader's other chores, with nothing to do."""

    async def maybe_sweep(self, *args: object) -> None: ...

    async def maybe_check(self, *args: object) -> None: ...

    async def maybe_expire_waits(self, *args: object) -> None: ...

    async def maybe_flush(self, *args: object, **kw: object) -> int:
        return 0

    def lost_lead(self) -> None: ...

    def forget(self) -> None: ...


class Log:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def info(self, event: str, **fields: object) -> None:
        self.lines.append(event)

    warning = error = info


async def test_a_slow_sweep_and_a_failed_one_keep_the_tracker_leading() -> None:
    # Given a tracker whose first sweep outlasts the leader lease's TTL and whose second fails
    server = Server()
    ctx = twin_context("run_tracker", lease_log=server, settings=Settings(leader_lease_ttl=TTL))
    log = Log()
    ctx.log = cast(Any, log)
    reconciler, idle = Reconciler(), Idle()
    judge = asyncio.create_task(server.judge())
    leading = asyncio.create_task(reconcile_as_leader(ctx, cast(Any, reconciler), *(cast(Any, idle),) * 6))
    try:
        # When it has led for a while
        await asyncio.sleep(TTL * 3)
        # Then it still leads: the lease was renewed through the slow sweep and the failed one, and sweeps went on
        assert not leading.done(), leading
        assert reconciler.rounds >= 4
        lease = await ctx.leases.read(s.TRACKER_LEADER_KEY)
        assert lease is not None and lease.value.holder.startswith("tracker-")
        assert log.lines.count("tracker leader") == 1 and "tracker leadership lost" not in log.lines, log.lines
        assert "tracker sweep failed; next round" in log.lines
    finally:
        ctx.stop.set()
        await asyncio.wait_for(leading, 5)
        judge.cancel()

"""A dead trigger replica's shards: the replica that takes them measures the gap from the dead one's last fire pass,
which only its membership lease still showed (its shard leases lapse unread: nobody contends for held shards)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec
import pytest
from prometheus_client import REGISTRY

from jetcron.bus.lease import Lease, LeaseValue
from jetcron.wire import subjects as s
from jetcron_services.trigger.shards import ShardOwner

T0 = datetime(2026, 1, 1, tzinfo=UTC)


class Server:
    """Leader and shard leases as the server keeps them: a lapsed one leaves nothing behind (`lapse`)."""

    def __init__(self) -> None:
        self.stored: dict[str, Lease] = {}

    async def keys(self, pattern: str) -> list[str]:
        prefix = pattern.removesuffix("*")
        return [k for k in self.stored if k.startswith(prefix)]

    async def read(self, key: str) -> Lease | None:
        return self.stored.get(key)

    async def contend(self, key: str, holder: str, ttl: float) -> tuple[Lease | None, Lease | None]:
        found = self.stored.get(key)
        if found is not None and found.value.holder:
            return None, found
        self.stored[key] = Lease(key=key, token=1, value=LeaseValue(holder=holder))
        return self.stored[key], found

    async def renew(self, lease: Lease, ttl: float, *, acted_at: datetime | None = None, **_: Any) -> Lease:
        self.stored[lease.key] = Lease(key=lease.key, token=lease.token + 1,
                                       value=msgspec.structs.replace(lease.value, acted_at=acted_at))
        return self.stored[lease.key]

    async def release(self, lease: Lease, *, acted_at: datetime | None = None) -> None:
        self.stored[lease.key] = Lease(key=lease.key, token=lease.token + 1,
                                       value=LeaseValue(holder="", acted_at=acted_at))

    def lapse(self, holder: str) -> None:
        for key in [k for k, v in self.stored.items() if v.value.holder == holder]:
            del self.stored[key]


def _gaps() -> tuple[float, float]:
    labels = {"kind": "trigger_shard"}
    return (REGISTRY.get_sample_value("jetcron_takeover_gap_seconds_count", labels) or 0.0,
            REGISTRY.get_sample_value("jetcron_takeover_gap_seconds_sum", labels) or 0.0)


@pytest.fixture
def server() -> Server:
    return Server()


async def test_the_shards_of_a_replica_that_died_are_measured_from_its_last_fire_pass(server: Server) -> None:
    a = ShardOwner(server, "trigger-a", 4, 2.0)  # type: ignore[arg-type]
    b = ShardOwner(server, "trigger-b", 4, 2.0)  # type: ignore[arg-type]
    await a.balance()
    await b.balance()
    await a.balance()  # a sees b: it gives back its share beyond 2
    await b.balance()  # and b takes it
    assert len(a.owned) == len(b.owned) == 2
    a.acted(T0)
    b.acted(T0)
    await a.balance()  # a's renewals carry its last pass
    await b.balance()  # b reads a's membership lease
    count, total = _gaps()

    server.lapse("trigger-a")  # a dies: its leases lapse, leaving nothing to read
    assert sorted(await b.balance()) == sorted(a.owned)
    b.acted(T0 + timedelta(seconds=3.5))

    assert _gaps() == (count + 2, pytest.approx(total + 7.0))
    b.acted(T0 + timedelta(seconds=4))  # the next passes measure nothing
    assert _gaps()[0] == count + 2


async def test_a_shard_handed_over_cleanly_is_measured_from_the_release_marker(server: Server) -> None:
    a = ShardOwner(server, "trigger-a", 1, 2.0)  # type: ignore[arg-type]
    await a.balance()
    a.acted(T0)
    count, total = _gaps()
    await a.release_all()
    assert server.stored[s.shard_lease_key(0)].value.acted_at == T0

    b = ShardOwner(server, "trigger-b", 1, 2.0)  # type: ignore[arg-type]
    assert await b.balance() == [0]
    b.acted(T0 + timedelta(seconds=0.25))
    assert _gaps() == (count + 1, pytest.approx(total + 0.25))

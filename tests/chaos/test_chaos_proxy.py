"""The fault proxy itself, against a real nats-server: latency, a lost reply, a blackhole that heals, a reset."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import nats
import nats.errors
import pytest
from chaos_proxy import FaultProxy

from jetcron.bus.server import EmbeddedNats


@pytest.fixture
async def proxy(nats_server: EmbeddedNats) -> AsyncIterator[FaultProxy]:
    p = await FaultProxy(nats_server.nodes[0].port).start()
    try:
        yield p
    finally:
        await p.close()


async def _echo(nc: nats.NATS) -> None:
    async def answer(msg: nats.aio.msg.Msg) -> None:
        await msg.respond(msg.data)

    await nc.subscribe("echo", cb=answer)
    await nc.flush()


async def test_each_fault_of_the_proxy(nats_server: EmbeddedNats, proxy: FaultProxy) -> None:
    server_side = await nats.connect(nats_server.url)
    await _echo(server_side)
    errors: list[Exception] = []

    async def on_error(exc: Exception) -> None:
        errors.append(exc)

    client = await nats.connect(proxy.url, allow_reconnect=True, reconnect_time_wait=0.2, max_reconnect_attempts=-1,
                                error_cb=on_error)
    try:
        # Clean: a request through the proxy is answered
        assert (await client.request("echo", b"a", timeout=2)).data == b"a"

        # Latency: each direction waits
        proxy.latency = 0.2
        started = time.monotonic()
        await client.request("echo", b"b", timeout=2)
        assert time.monotonic() - started >= 0.4
        proxy.latency = 0.0

        # Latency with jitter: every request of a burst is answered with its own payload, never a neighbour's
        proxy.latency, proxy.jitter = 0.1, 0.05
        started = time.monotonic()
        replies = await asyncio.gather(*(client.request("echo", str(i).encode(), timeout=5) for i in range(20)))
        assert [r.data for r in replies] == [str(i).encode() for i in range(20)]
        assert time.monotonic() - started >= 0.1  # at least 50 ms each way
        proxy.latency, proxy.jitter = 0.0, 0.0

        # Drop one reply: that request times out (outcome unknown to the client), the next is answered
        proxy.drop_reply()
        with pytest.raises(nats.errors.TimeoutError):
            await client.request("echo", b"c", timeout=0.5)
        assert proxy.dropped == 1
        assert (await client.request("echo", b"d", timeout=2)).data == b"d"

        # Blackhole: nothing passes; on heal the held bytes flow and the connection carries on
        proxy.blackhole()
        with pytest.raises(nats.errors.TimeoutError):
            await client.request("echo", b"e", timeout=0.5)
        proxy.heal()
        assert (await client.request("echo", b"f", timeout=2)).data == b"f"

        # Reset: the connection is cut with an RST; the client reconnects through the proxy once it is let in
        assert proxy.reset(refuse=True) == 1
        await asyncio.sleep(0.5)
        assert not client.is_connected
        proxy.heal()

        async def answered() -> bool:
            try:
                return (await client.request("echo", b"g", timeout=0.5)).data == b"g"
            except (nats.errors.TimeoutError, nats.errors.ConnectionReconnectingError, nats.errors.NoRespondersError):
                return False

        deadline = time.monotonic() + 10
        while not await answered():
            assert time.monotonic() < deadline, "no reconnect through the proxy"
            await asyncio.sleep(0.2)
    finally:
        await client.close()
        await server_side.close()

"""bus.rpc on a real server: a request nobody answers says why, and the SDK turns that into an error a user
can act on."""

from __future__ import annotations

import asyncio

import nats
import pytest

from jetcron.bus import rpc
from jetcron.bus.ports import Message
from jetcron.bus.server import EmbeddedNats
from jetcron.sdk.client import Client
from jetcron.sdk.errors import ApiError


async def test_a_request_is_answered_or_says_why_not(nats_server: EmbeddedNats) -> None:
    nc = await nats.connect(nats_server.url)
    try:
        with pytest.raises(rpc.NoAnswer, match=r"^probe\.none: no responders$") as nobody:
            await rpc.request(nc, "probe.none", b"x", timeout=2)
        assert nobody.value.responders is False

        async def silent(msg: Message) -> None:
            pass

        async def echo(msg: Message) -> None:
            await msg.respond(msg.data.upper())

        await rpc.serve(nc, "probe.silent", silent, flush=True)
        await rpc.serve(nc, "probe.echo", echo, queue="q", flush=True)
        with pytest.raises(rpc.NoAnswer, match=r"^probe\.silent: no answer within 0\.3s$") as late:
            await rpc.request(nc, "probe.silent", b"x", timeout=0.3)
        assert late.value.responders is True
        assert (await rpc.request(nc, "probe.echo", b"hi", timeout=2)).data == b"HI"
    finally:
        await rpc.close(nc)


async def test_the_sdk_names_a_missing_api_and_a_slow_one(nats_server: EmbeddedNats) -> None:
    client = await Client.connect(nats_server.url, timeout=0.5)
    try:
        with pytest.raises(ApiError, match=r"no api service is answering \(is `jetcron up` running\?\)") as gone:
            await client.call("jobs.list")
        assert gone.value.code == "unavailable" and gone.value.retryable

        async def silent(msg: Message) -> None:
            await asyncio.sleep(0)

        await rpc.serve(client.nc, "jc.admin.jobs.list", silent, flush=True)
        with pytest.raises(ApiError, match=r"^api did not answer jobs\.list within 0\.5s$"):
            await client.call("jobs.list")
    finally:
        await client.close()

"""consume.PullQueue beyond the port's contract: how many delivered messages it holds, and how it keeps a pull
request open through expiry, a deleted consumer, close and a server restart. Real nats-server only."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import nats
import pytest
from contract_support import names
from nats.js.api import ConsumerConfig, RetentionPolicy, StreamConfig

from jetcron.bus.consume import ConsumerGone, PullQueue
from jetcron.bus.server import EmbeddedNats, ServerNode, start_node, stop_node, wait_healthy


class Stream:
    def __init__(self, js: Any, name: str, subject: str) -> None:
        self.js, self.name, self.subject = js, name, subject

    async def publish(self, count: int) -> None:
        for i in range(count):
            await self.js.publish(f"{self.subject}.{i}", f"m{i}".encode())

    async def ack_pending(self) -> int:
        return int((await self.js.consumer_info(self.name, "work")).num_ack_pending)

    async def make_consumer(self, ack_wait: float = 30.0) -> None:
        await self.js.add_consumer(self.name, ConsumerConfig(durable_name="work", ack_wait=ack_wait, max_deliver=-1))


async def _stream(js: Any) -> Stream:
    n = next(names)
    stream = Stream(js, f"PQ{n}", f"pq{n}")
    await js.add_stream(StreamConfig(name=stream.name, subjects=[f"{stream.subject}.>"],
                                     retention=RetentionPolicy.WORK_QUEUE))
    await stream.make_consumer()
    return stream


@pytest.fixture
async def js(contract_server: EmbeddedNats) -> AsyncIterator[Any]:
    nc = await nats.connect(contract_server.url)
    try:
        yield nc.jetstream(timeout=5)
    finally:
        await nc.close()


async def _stays_at_most(stream: Stream, most: int, seconds: float) -> None:
    ends = time.monotonic() + seconds
    while time.monotonic() < ends:
        assert await stream.ack_pending() <= most
        await asyncio.sleep(0.05)


async def _take(queue: PullQueue, count: int) -> list[Any]:
    """`count` messages over as many fetches as the deliveries take: a fetch returns what one read brought, and on
    a busy machine the server's batch can arrive over several reads."""
    got: list[Any] = []
    while len(got) < count:
        got += await queue.fetch(count - len(got), timeout=2)
    return got


async def test_a_caller_holds_at_most_one_batch_of_delivered_messages(js: Any) -> None:
    # Given 30 messages waiting
    stream = await _stream(js)
    await stream.publish(30)
    queue = await PullQueue.bind(js, stream.name, "work")
    try:
        # When the caller fetches 10 and has not come back for more
        got = await _take(queue, 10)
        # Then 10 are delivered, not 10 plus a next request's worth
        assert [m.data for m in got] == [f"m{i}".encode() for i in range(10)]
        await _stays_at_most(stream, 10, 0.3)
        # And the next fetch carries on in order
        for m in got:
            await m.ack()
        more = await _take(queue, 10)
        assert [m.data for m in more] == [f"m{i}".encode() for i in range(10, 20)]
    finally:
        await queue.close()


async def test_a_request_that_expired_is_renewed_while_the_caller_waits(js: Any) -> None:
    # Given a queue whose pull requests expire after 0.3 s, and a caller waiting up to 3 s
    stream = await _stream(js)
    queue = await PullQueue.bind(js, stream.name, "work")
    queue.EXPIRES = 0.3
    try:
        waiting = asyncio.create_task(queue.fetch(5, timeout=3))
        # When a message comes after three expiries
        await asyncio.sleep(1.0)
        await stream.publish(1)
        # Then the waiting caller gets it (a request that was not renewed would leave it to the caller's timeout)
        got = await waiting
        assert [m.data for m in got] == [b"m0"]
    finally:
        await queue.close()


async def test_a_deleted_consumer_is_reported_and_one_made_again_is_read(js: Any) -> None:
    # Given a caller waiting on a consumer
    stream = await _stream(js)
    queue = await PullQueue.bind(js, stream.name, "work")
    try:
        waiting = asyncio.create_task(queue.fetch(5, timeout=5))
        await asyncio.sleep(0.2)
        # When the consumer is deleted
        await js.delete_consumer(stream.name, "work")
        # Then the caller hears why, before its timeout
        with pytest.raises(ConsumerGone, match="pull request refused: 409 Consumer Deleted"):
            await waiting
        # And once it is made again, messages flow again through the same queue
        await stream.make_consumer()
        await stream.publish(1)
        assert [m.data for m in await queue.fetch(5, timeout=3)] == [b"m0"]
    finally:
        await queue.close()


async def test_close_gives_back_at_once_what_it_had_not_handed_over(js: Any) -> None:
    # Given a queue holding 3 delivered messages its caller has not taken (ack wait 30 s)
    stream = await _stream(js)
    queue = await PullQueue.bind(js, stream.name, "work")
    with pytest.raises(TimeoutError, match=r"no message within 0\.2s"):
        await queue.fetch(5, timeout=0.2)
    await stream.publish(3)
    ends = time.monotonic() + 5
    while await stream.ack_pending() < 3:
        assert time.monotonic() < ends, "the open request did not deliver"
        await asyncio.sleep(0.05)
    # When it is closed
    await queue.close()
    # Then another reader gets them now, not after the ack wait
    other = await PullQueue.bind(js, stream.name, "work")
    try:
        got = await other.fetch(5, timeout=3)
        assert sorted(m.data for m in got) == [b"m0", b"m1", b"m2"]  # a nak'd message may come back in any order
        assert {m.metadata.num_delivered for m in got} == {2}
    finally:
        await other.close()


def _kill_and_start(node: ServerNode) -> None:
    stop_node(node, kill=True)
    start_node(node)
    wait_healthy(node, 30)


async def test_a_request_lost_with_the_connection_is_asked_again(tmp_path: Path) -> None:
    # Given a queue with an open request on a server that is killed (so it sends no status) and started again
    server = EmbeddedNats(tmp_path / "nats")
    server.start(timeout=30)
    nc = await nats.connect(server.url, reconnect_time_wait=0.2, max_reconnect_attempts=-1)
    try:
        js = nc.jetstream(timeout=5)
        stream = await _stream(js)
        queue = await PullQueue.bind(js, stream.name, "work")
        queue.MISSED = 600.0  # only the reconnect may tell it the request is gone
        with pytest.raises(TimeoutError):
            await queue.fetch(1, timeout=0.2)
        await asyncio.to_thread(_kill_and_start, server.nodes[0])
        ends = time.monotonic() + 20
        while not (nc.is_connected and nc.stats["reconnects"]):
            assert time.monotonic() < ends, "the client did not reconnect"
            await asyncio.sleep(0.05)
        # When a message is published after the reconnect
        await stream.publish(1)
        # Then the queue, having asked again, delivers it
        assert [m.data for m in await queue.fetch(1, timeout=5)] == [b"m0"]
        await queue.close()
    finally:
        await nc.close()
        server.stop()

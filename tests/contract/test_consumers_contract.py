"""ports.Consumers: a durable consumer consumed on the server (jetcron.bus.consume.ServerConsumers) and on the twin
(memory.MemoryConsumers) by the same work loop: each message handled, settled by what its handler says (done:
acked and never seen again; Retry: delivered again), until stopped."""

from __future__ import annotations

import asyncio

from contract_support import ConsumerSide
from harness import wait_for

from jetcron.bus.consume import Retry
from jetcron.bus.ports import Consumers, Durable, Message


async def test_each_message_is_handled_and_one_asked_again_comes_back(consumers: ConsumerSide) -> None:
    port, stream, put = consumers.port, consumers.stream, consumers.put
    for data in (b"a", b"b", b"c"):
        await put(data)
    seen: list[bytes] = []
    stop = asyncio.Event()

    async def handle(msg: Message) -> None:
        seen.append(msg.data)
        if msg.data == b"b" and seen.count(b"b") == 1:
            raise Retry(0.1, "not yet")

    loop = asyncio.create_task(port.consume(stream, "work", handle, batch=2, stop=stop))
    await wait_for(lambda: sorted(seen) == [b"a", b"b", b"b", b"c"], 10, what="every message, b twice")
    stop.set()
    await asyncio.wait_for(loop, 5)

    # Consumed again: nothing is left (each was acked once its handler was done with it)
    again: list[bytes] = []

    async def record(msg: Message) -> None:
        again.append(msg.data)

    stop = asyncio.Event()
    loop = asyncio.create_task(port.consume(stream, "work", record, stop=stop))
    await asyncio.sleep(1.5)  # past the server's ack wait (1 s): an unacked message would be delivered again
    stop.set()
    await asyncio.wait_for(loop, 5)
    assert again == []


async def test_ensure_makes_a_durable_consumer_once_and_it_can_be_consumed(
        consumers_to_make: tuple[Consumers, str]) -> None:
    port, stream = consumers_to_make
    durable = Durable(name="mine", filter_subject=">", ack_wait=5.0, max_ack_pending=10, inactive_threshold=60.0)
    assert await port.ensure(stream, durable) == "mine"
    assert await port.ensure(stream, durable) == "mine"  # the same again changes nothing and is no error
    stop = asyncio.Event()
    loop = asyncio.create_task(port.consume(stream, "mine", lambda msg: asyncio.sleep(0), stop=stop))
    await asyncio.sleep(0.1)
    assert not loop.done()  # consuming it found it there
    stop.set()
    await asyncio.wait_for(loop, 5)

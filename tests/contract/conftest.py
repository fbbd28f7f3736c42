"""The contract suite: each test runs twice, against the in-memory twin (jetcron.bus.memory) and against the real
adapter on a real nats-server. A twin that passes here may stand in for the server in a unit test."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator

import nats
import pytest
from contract_support import (
    ACK_WAIT,
    ConsumerSide,
    Item,
    LeaseSide,
    PublisherSide,
    Queue,
    ServerPublisher,
    ServerQueue,
    ServerStreamsSide,
    StreamsSide,
    TwinPublisher,
    TwinQueue,
    TwinStreams,
    names,
)
from nats.js import JetStreamContext
from nats.js.api import ConsumerConfig, KeyValueConfig, RetentionPolicy, StreamConfig

from jetcron.bus import lease as lease_store
from jetcron.bus.consume import PullQueue, ServerConsumers
from jetcron.bus.kv import ServerBuckets, Store
from jetcron.bus.lease import Leases
from jetcron.bus.memory import MemoryBuckets, MemoryConsumers, MemoryLeaseLog, MemoryRecords, MemoryRpc
from jetcron.bus.ports import Buckets, Consumers, Records, Rpc
from jetcron.bus.rpc import NatsRpc
from jetcron.bus.server import EmbeddedNats
from jetcron.bus.topology import ensure_topology


@pytest.fixture(scope="module")
def contract_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedNats]:
    """One server for a whole module: each test makes its own bucket or stream on it."""
    server = EmbeddedNats(tmp_path_factory.mktemp("contract") / "nats")
    server.start(timeout=30)
    try:
        yield server
    finally:
        server.stop()


@contextlib.asynccontextmanager
async def server_js(request: pytest.FixtureRequest) -> AsyncIterator[JetStreamContext]:
    """A JetStream context on the module's server, closed after the test."""
    server: EmbeddedNats = request.getfixturevalue("contract_server")
    nc = await nats.connect(server.url)
    try:
        yield nc.jetstream(timeout=5)
    finally:
        await nc.close()


async def work_stream(js: JetStreamContext, prefix: str) -> tuple[str, str]:
    """A new work-queue stream `<PREFIX>n` on subjects `<prefix>n.>` with its durable `work`, whose messages come
    back ACK_WAIT seconds after a delivery not acked: (stream, subject prefix)."""
    n = next(names)
    stream, subject = f"{prefix.upper()}{n}", f"{prefix}{n}"
    await js.add_stream(StreamConfig(name=stream, subjects=[f"{subject}.>"], retention=RetentionPolicy.WORK_QUEUE))
    await js.add_consumer(stream, ConsumerConfig(durable_name="work", ack_wait=ACK_WAIT, max_deliver=-1))
    return stream, subject


@pytest.fixture(params=["twin", "server"])
async def make_records(request: pytest.FixtureRequest
                       ) -> AsyncIterator[Callable[[], Awaitable[Records[Item]]]]:
    """Makes a fresh, empty bucket of Items (the twin, or a KV bucket on the server)."""
    if request.param == "twin":
        async def twin() -> Records[Item]:
            return MemoryRecords(f"jc_t{next(names)}_items", Item)

        yield twin
        return
    async with server_js(request) as js:
        async def real() -> Records[Item]:
            bucket = f"jc_t{next(names)}_items"
            await js.create_key_value(KeyValueConfig(bucket=bucket, history=1))
            return await Store.open(js, bucket, Item)

        yield real


@pytest.fixture(params=["twin", "server"])
async def queue(request: pytest.FixtureRequest) -> AsyncIterator[Queue]:
    """An empty work queue whose messages are redelivered ACK_WAIT seconds after a delivery not acked."""
    if request.param == "twin":
        yield TwinQueue()
        return
    async with server_js(request) as js:
        stream, subject = await work_stream(js, "ct")
        pull = await PullQueue.bind(js, stream, "work")
        try:
            yield ServerQueue(js, subject, pull)
        finally:
            await pull.close()


@pytest.fixture(params=["twin", "server"])
async def lease_side(request: pytest.FixtureRequest) -> AsyncIterator[LeaseSide]:
    """Leases over the twin's log or the server's lease buckets, and how a lease is let lapse on each: the twin is
    told to (it has no clock of its own), the server's TTL is waited out."""
    if request.param == "twin":
        log = MemoryLeaseLog()
        yield LeaseSide(Leases(log), lapse=log.expire, server=False)
        return
    async with server_js(request) as js:
        await ensure_topology(js)
        yield LeaseSide(lease_store.on_server(js), lapse=None, server=True)


@pytest.fixture(params=["twin", "server"])
async def publisher_side(request: pytest.FixtureRequest) -> AsyncIterator[PublisherSide]:
    """A publisher onto an empty stream that keeps per-message TTLs and a duplicate window (the server's), or the
    twin's list."""
    if request.param == "twin":
        yield TwinPublisher()
        return
    async with server_js(request) as js:
        n = next(names)
        await js.add_stream(StreamConfig(name=f"CP{n}", subjects=[f"cp{n}.>"], allow_msg_ttl=True))
        yield ServerPublisher(js, f"CP{n}", f"cp{n}")


@pytest.fixture(params=["twin", "server"])
async def rpc_pair(request: pytest.FixtureRequest) -> AsyncIterator[tuple[Rpc, Rpc]]:
    """Two ends of request/reply: two connections to the server, or the one twin both ends share."""
    if request.param == "twin":
        twin = MemoryRpc()
        yield twin, twin
        return
    server: EmbeddedNats = request.getfixturevalue("contract_server")
    asker, answerer = await nats.connect(server.url), await nats.connect(server.url)
    try:
        yield NatsRpc(asker), NatsRpc(answerer)
    finally:
        await asker.close()
        await answerer.close()


@pytest.fixture(params=["twin", "server"])
async def buckets(request: pytest.FixtureRequest) -> AsyncIterator[tuple[Buckets, str]]:
    """A bucket opener and the name of an empty bucket it can open (made on the server first, as jetcron.bus.topology
    makes every bucket of jetcron's)."""
    name = f"jc_t{next(names)}_open"
    if request.param == "twin":
        yield MemoryBuckets(), name
        return
    async with server_js(request) as js:
        await js.create_key_value(KeyValueConfig(bucket=name, history=1))
        yield ServerBuckets(js), name


@pytest.fixture(params=["twin", "server"])
async def consumers(request: pytest.FixtureRequest) -> AsyncIterator[ConsumerSide]:
    """A Consumers port, the name of an empty work-queue stream whose durable `work` it consumes, and how a test
    puts a message on that stream."""
    if request.param == "twin":
        twin = MemoryConsumers()
        yield ConsumerSide(twin, "CS", lambda data: twin.queue("CS", "work").publish("cs.one", data))
        return
    async with server_js(request) as js:
        stream, subject = await work_stream(js, "cs")

        async def put(data: bytes) -> int:
            return int((await js.publish(f"{subject}.one", data)).seq)

        yield ConsumerSide(ServerConsumers(js), stream, put)


@pytest.fixture(params=["twin", "server"])
async def streams_side(request: pytest.FixtureRequest) -> AsyncIterator[StreamsSide]:
    """Streams over the twin's streams or the server's, with nothing declared yet."""
    if request.param == "twin":
        yield TwinStreams()
        return
    async with server_js(request) as js:
        yield ServerStreamsSide(js)


@pytest.fixture(params=["twin", "server"])
async def consumers_to_make(request: pytest.FixtureRequest) -> AsyncIterator[tuple[Consumers, str]]:
    """A Consumers port and a stream (of limits, not a work queue) with no consumer yet."""
    if request.param == "twin":
        yield MemoryConsumers(), "CE"
        return
    async with server_js(request) as js:
        n = next(names)
        await js.add_stream(StreamConfig(name=f"CE{n}", subjects=[f"ce{n}.>"]))
        yield ServerConsumers(js), f"CE{n}"

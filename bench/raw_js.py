"""The raw JetStream rates of this server, measured in the same run: the denominator of every ratio."""

from __future__ import annotations

import asyncio
import time

import nats

from bench.common import summary

N_PUBLISH = 20_000
N_KV = 5_000
KV_CONCURRENCY = 64


async def pipelined_publish_rate(url: str, n: int = N_PUBLISH) -> float:
    """Acknowledged publishes per second with many in flight (publish_async): the server's ceiling, not one
    client's (docs/decisions-nats.md)."""
    nc = await nats.connect(url)
    js = nc.jetstream()
    await js.add_stream(name="BENCH_RAW", subjects=["bench.raw"], max_msgs=n * 2)
    start = time.perf_counter()
    futures = [await js.publish_async("bench.raw", b"x" * 64) for _ in range(n)]
    await asyncio.gather(*futures)
    rate = n / (time.perf_counter() - start)
    await js.delete_stream("BENCH_RAW")
    await nc.close()
    return rate


async def kv_cas_rate(url: str, n: int = N_KV, concurrency: int = KV_CONCURRENCY) -> float:
    """Revision-checked KV updates per second, `concurrency` keys updated in parallel."""
    nc = await nats.connect(url)
    js = nc.jetstream()
    kv = await js.create_key_value(bucket="bench_raw", history=1)
    revisions = {f"k{i}": await kv.create(f"k{i}", b"0") for i in range(concurrency)}

    async def worker(key: str, count: int) -> None:
        for _ in range(count):
            revisions[key] = await kv.update(key, b"1", last=revisions[key])

    start = time.perf_counter()
    await asyncio.gather(*(worker(k, n // concurrency) for k in revisions))
    rate = (n // concurrency * concurrency) / (time.perf_counter() - start)
    await js.delete_key_value("bench_raw")
    await nc.close()
    return rate


async def measure(url: str) -> dict[str, float]:
    return {"publish_ack_per_s": await pipelined_publish_rate(url), "kv_cas_per_s": await kv_cas_rate(url)}


def fields(raws: list[dict[str, float]]) -> dict[str, object]:
    """The raw rates of a scenario's repetitions, as every result reports them."""
    return {"raw_publish_ack_per_s": summary([r["publish_ack_per_s"] for r in raws]),
            "raw_kv_cas_per_s": summary([r["kv_cas_per_s"] for r in raws])}

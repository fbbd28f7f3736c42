"""Atomic batch publish against plain acked publishes, on one node (R1) and a 3-node cluster (R3), sync `always`.

A lever for fewer acknowledged writes per run: several messages to one stream committed with one acknowledgement
(nats-server 2.12+, `allow_atomic` on the stream). The first messages of a batch go without a reply (the server
answers only the commit, or an error), the last carries `Nats-Batch-Commit: 1` and is a request; one failed
expectation refuses the whole batch. Measured here, for each size and number of batches in flight: commits per
second, messages per second and the commit's latency; beside them the same stream's plain acked publishes, one and
many in flight. The figures decide whether the protocol's writes may be batched (docs/decisions-protocol.md).

Prints one JSON line per topology (`python -m bench.run --only bench.batch_publish` keeps them).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import nats
import nats.errors
from nats.aio.client import Client
from nats.js.api import StreamConfig

from bench.common import emit, percentile, summary
from jetcron.bus.server import EmbeddedNats

BODY = b"x" * 200
"""About a run record's size on the hot path (a PlaceRun, an AssignRun)."""


async def _commit(nc: Client, subject: str, size: int) -> None:
    """One atomic batch of `size` messages, its commit acknowledged."""
    batch = uuid.uuid4().hex
    for n in range(1, size):
        await nc.publish(f"{subject}.{n}", BODY, headers={"Nats-Batch-Id": batch, "Nats-Batch-Sequence": str(n)})
    reply = await nc.request(f"{subject}.{size}", BODY, timeout=10, headers={
        "Nats-Batch-Id": batch, "Nats-Batch-Sequence": str(size), "Nats-Batch-Commit": "1"})
    ack = json.loads(reply.data)
    if "error" in ack or ack.get("count") != size:
        raise RuntimeError(f"batch of {size} not committed: {ack}")


async def _publish(nc: Client, subject: str, size: int) -> None:
    """`size` plain publishes, each acknowledged before the next (a run's writes as today)."""
    for n in range(1, size + 1):
        reply = await nc.request(f"{subject}.{n}", BODY, timeout=10)
        if b'"error"' in reply.data:
            raise RuntimeError(f"publish refused: {reply.data!r}")


async def _leader_elected(nc: Client, within: float = 30.0) -> None:
    """A new R3 stream answers nothing until its replicas have elected a leader: a publish meanwhile finds no
    responders. Wait for the first one that is stored."""
    deadline = time.perf_counter() + within
    while True:
        try:
            await nc.request("bb.warm", b"", timeout=2)
            return
        except (nats.errors.NoRespondersError, nats.errors.TimeoutError):
            if time.perf_counter() > deadline:
                raise
            await asyncio.sleep(0.1)


async def _rate(nc: Client, step: Any, subject: str, size: int, in_flight: int, seconds: float) -> dict[str, float]:
    """`in_flight` workers each doing `step` (a batch, or `size` publishes) for `seconds`: steps/s, messages/s,
    and each step's latency (ms)."""
    latencies: list[float] = []
    deadline = time.perf_counter() + seconds

    async def worker() -> None:
        while time.perf_counter() < deadline:
            began = time.perf_counter()
            await step(nc, subject, size)
            latencies.append((time.perf_counter() - began) * 1000)

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(in_flight)))
    took = time.perf_counter() - start
    return {"steps_per_s": len(latencies) / took, "msgs_per_s": len(latencies) * size / took,
            "p50_ms": percentile(latencies, 50), "p99_ms": percentile(latencies, 99)}


async def measure(url: str, replicas: int, sizes: list[int], in_flight: list[int],
                  seconds: float) -> dict[str, dict[str, float]]:
    nc = await nats.connect(servers=url.split(","))
    js = nc.jetstream(timeout=10)
    found: dict[str, dict[str, float]] = {}
    try:
        await js.add_stream(StreamConfig(name="BENCH_BATCH", subjects=["bb.>"], allow_atomic=True,
                                         num_replicas=replicas))
        await _leader_elected(nc)
        for flight in in_flight:
            for size in sizes:
                found[f"batch{size}_x{flight}"] = await _rate(nc, _commit, "bb.c", size, flight, seconds)
            # the same writes one by one, each acked: what a batch of that size replaces
            for size in (1, max(sizes)):
                found[f"plain{size}_x{flight}"] = await _rate(nc, _publish, "bb.p", size, flight, seconds)
        await js.delete_stream("BENCH_BATCH")
    finally:
        await nc.close()
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="1,2,4,8,16", help="messages per batch")
    parser.add_argument("--in-flight", default="1,8,32", help="batches (or publishers) at once; the server takes "
                        "50 batches in flight per stream")
    parser.add_argument("--seconds", type=float, default=3.0, help="per measurement")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--nodes", default="1,3", help="topologies: 1 (R1) and/or 3 (R3)")
    args = parser.parse_args()
    sizes = [int(v) for v in args.sizes.split(",")]
    flights = [int(v) for v in args.in_flight.split(",")]
    for nodes in [int(v) for v in args.nodes.split(",")]:
        reps: list[dict[str, dict[str, float]]] = []
        for _ in range(args.reps):
            with tempfile.TemporaryDirectory() as tmp:
                server = EmbeddedNats(Path(tmp) / "nats", nodes=nodes, sync_always=True)
                server.start(timeout=60)
                try:
                    reps.append(asyncio.run(measure(server.url, nodes, sizes, flights, args.seconds)))
                finally:
                    server.stop()
        cases = {case: {metric: summary([r[case][metric] for r in reps]) for metric in reps[0][case]}
                 for case in reps[0]}
        emit({"bench": f"batch_publish_r{nodes}", "sync_always": True, "n": args.reps, "replicas": nodes,
              "body_bytes": len(BODY), "seconds_each": args.seconds, "cases": cases,
              "what": "atomic batches (one ack per commit) against plain acked publishes on one stream; "
                      "batchN_xK: N messages a batch, K batches in flight; plainN_xK: N publishes acked one by one"})


if __name__ == "__main__":
    main()

"""How much of a run's CPU is moving its messages: the messages each process sends and receives per run (the
server's own count, `/connz`), priced at what nats-py itself costs per message on this machine, beside the CPU the
processes spent (docs/decisions-protocol.md, "CPU per run").

The price is nats-py's least: a core publish (headers as jetcron's messages carry them) and a subscription whose
callback does nothing, each timed in a process of its own (`getrusage`) on uvloop, as jetcron's services run. So
`floor_ms_per_run` is what any Python service on this client would spend to move jetcron's messages, before it
decodes, decides or encodes anything; what the services spend above it is jetcron's own work.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import resource
import statistics
import urllib.request
from multiprocessing.synchronize import Event as MpEvent
from typing import Any

import nats
import uvloop

from bench.common import emit, stream_bytes, summary, system
from bench.profile import _cpu_seconds
from bench.throughput import _submit_and_wait
from jetcron.wire.subjects import BUCKET_RUNS, kv_stream

PRICE_MESSAGES = 50_000
PAYLOAD = b"x" * 200
HEADERS = {"Nats-Msg-Id": "r.1.finished", "traceparent": "00-" + "1" * 32 + "-" + "2" * 16 + "-01"}


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _receive(url: str, n: int, ready: MpEvent, out: Any) -> None:
    """In a process of its own: CPU seconds per message delivered to a callback that does nothing."""

    async def main() -> None:
        nc = await nats.connect(url)
        got, start = 0, 0.0
        done = asyncio.Event()

        async def nothing(_msg: Any) -> None:
            nonlocal got, start
            got += 1
            if got == 1:
                start = _cpu()
            if got == n:
                done.set()

        await nc.subscribe("bench.price", cb=nothing, pending_msgs_limit=n * 2, pending_bytes_limit=1 << 30)
        await nc.flush()
        ready.set()
        await done.wait()
        out.put((_cpu() - start) / (n - 1))
        await nc.close()

    uvloop.run(main())


async def _send(url: str, n: int) -> float:
    """CPU seconds per core publish (the client's flusher writes included)."""
    nc = await nats.connect(url)
    start = _cpu()
    for i in range(n):
        await nc.publish("bench.price", PAYLOAD, headers=HEADERS)
        if i % 256 == 0:
            await asyncio.sleep(0)  # let the flusher write, as a service's loop does between messages
    await nc.flush()
    spent = (_cpu() - start) / n
    await nc.close()
    return spent


def price(url: str, n: int = PRICE_MESSAGES) -> tuple[float, float]:
    """nats-py's CPU seconds per message sent and per message received, each in its own process."""
    ctx = mp.get_context("spawn")
    ready, out = ctx.Event(), ctx.Queue()
    receiver = ctx.Process(target=_receive, args=(url, n, ready, out))
    receiver.start()
    try:
        if not ready.wait(30):
            raise TimeoutError("the receiving process did not subscribe")
        sent = uvloop.run(_send(url, n))
        received = float(out.get(timeout=120))
    finally:
        receiver.join(timeout=10)
        if receiver.is_alive():
            receiver.kill()
    return sent, received


def connections(monitor_url: str) -> dict[int, dict[str, Any]]:
    with urllib.request.urlopen(f"{monitor_url}/connz?limit=4096", timeout=10) as reply:
        return {c["cid"]: c for c in json.load(reply)["connections"]}


def count(runs: int) -> dict[str, Any]:
    """One burst of `runs` sim runs at `always`: per process, messages sent and received and CPU ms per run, and
    nats-py's price per message measured on the same server right after."""
    with system(sync_always=True, agents=2, sim=True) as jc:
        before = connections(jc.server.monitor_url)
        cpu_before = {name: _cpu_seconds(p.pid) for name, p in jc.procs.items()}
        _elapsed, done = asyncio.run(_submit_and_wait(jc.url, runs, ["true"], "msg"))
        cpu = {name: (_cpu_seconds(p.pid) - cpu_before[name]) / max(1, done) * 1e3 for name, p in jc.procs.items()}
        after = connections(jc.server.monitor_url)
        runs_bucket = stream_bytes(jc.server.monitor_url, kv_stream(BUCKET_RUNS))
        sent_price, received_price = price(jc.url)
    per: dict[str, dict[str, float]] = {}
    for cid, conn in after.items():
        name = str(conn.get("name") or "").removeprefix("jetcron-")
        if name not in ("api", "trigger", "placement", "run_tracker", "agent"):
            continue  # the bench's own clients
        old = before.get(cid, {"in_msgs": 0, "out_msgs": 0, "in_bytes": 0, "out_bytes": 0})
        row = per.setdefault(name, {"sent": 0.0, "received": 0.0, "bytes": 0.0})
        row["sent"] += (conn["in_msgs"] - old["in_msgs"]) / max(1, done)  # the server's in: what the client sent
        row["received"] += (conn["out_msgs"] - old["out_msgs"]) / max(1, done)
        row["bytes"] += (conn["in_bytes"] - old["in_bytes"] + conn["out_bytes"] - old["out_bytes"]) / max(1, done)
    agents_cpu = sum(v for k, v in cpu.items() if k.startswith("agent-"))
    cpu_by = {**{k: v for k, v in cpu.items() if not k.startswith("agent-")}, "agent": agents_cpu}
    for name, row in per.items():
        row["cpu_ms"] = cpu_by.get(name, 0.0)
        row["floor_ms"] = (row["sent"] * sent_price + row["received"] * received_price) * 1e3
    sent = sum(r["sent"] for r in per.values())
    received = sum(r["received"] for r in per.values())
    floor = sent * sent_price + received * received_price
    total = sum(cpu.values())
    return {"done": done, "per_process": per, "sent_per_run": sent, "received_per_run": received,
            "bytes_per_run": sum(r["bytes"] for r in per.values()),
            "runs_bucket_bytes_per_run": runs_bucket / max(1, done),
            "send_us": sent_price * 1e6, "receive_us": received_price * 1e6, "floor_ms_per_run": floor * 1e3,
            "cpu_ms_per_run": total, "cpu_us_per_message": total * 1e3 / max(1e-9, sent + received)}


def run(runs: int, reps: int) -> dict[str, Any]:
    results = [count(runs) for _ in range(reps)]
    names = sorted({name for r in results for name in r["per_process"]})
    per = {name: {field: round(statistics.median(r["per_process"][name][field] for r in results
                                                 if name in r["per_process"]), 3)
                  for field in ("sent", "received", "bytes", "cpu_ms", "floor_ms")} for name in names}
    return {"bench": "messages", "runs": runs, "reps": reps, "sync_always": True, "agents": "2 sim",
            "per_process_median": per,
            **{field: summary([float(r[field]) for r in results]) for field in (
                "sent_per_run", "received_per_run", "bytes_per_run", "runs_bucket_bytes_per_run", "send_us",
                "receive_us", "floor_ms_per_run", "cpu_ms_per_run", "cpu_us_per_message")},
            "method": "python -m bench.messages: a burst of sim runs at `always`; messages and bytes (both ways) "
                      "per run from the server's /connz counts per connection; the runs bucket's stored bytes per "
                      "run at the end (/jsz); nats-py's CPU per core publish and per delivered "
                      f"message ({PRICE_MESSAGES} each, 200 bytes with two headers, uvloop, own process)"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5000)
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    emit(run(args.runs, args.reps))


if __name__ == "__main__":
    main()

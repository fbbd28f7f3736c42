"""What removing old messages costs a stream's writes, by how the server removes them, sync `always`.

History ages out on the server (docs/operations.md): a run record's Nats-TTL, the events' and logs' TTLs and the
buckets' one-value-per-key rollups. Each removal is work the stream does beside its writes. This measures one
stream's acknowledged publishes per second (`--in-flight` at once, each a fresh key of about a run record's size)
while the stream removes as many messages as it takes, four ways, each on a fresh server:

- `kept`: nothing removed (the reference);
- `rollup`: every key written three times (a run record's revisions), the older value removed by the
  one-value-per-key limit;
- `max_age`: the stream's `max_age`, the oldest removed first;
- `ttl`: each message's own `Nats-TTL` header (what a finished run's record, event and claim carry).

The first `--life` seconds write without removals (nothing is old enough yet); the rate is then measured over
`--seconds`, while removals keep pace with the writes. Repetitions take the four in turn.

Prints one JSON line (`python -m bench.run --only bench.expiry` keeps it).
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

import nats
from nats.js.api import StreamConfig

from bench.common import emit, summary
from jetcron.bus.server import EmbeddedNats

MODES = ("kept", "rollup", "max_age", "ttl")
BODY = b"x" * 1400
"""About a run record's encoded size (bench/placement_memory.py: 1,387 B)."""


async def measure(url: str, mode: str, life: int, seconds: float, in_flight: int) -> dict[str, float]:
    """Publishes per second over `seconds` once `life` seconds of writes have passed, and what was removed."""
    nc = await nats.connect(url)
    js = nc.jetstream(timeout=10)
    try:
        await js.add_stream(StreamConfig(name="BENCH_EXPIRY", subjects=["be.>"], max_msgs_per_subject=1,
                                         allow_msg_ttl=True, max_age=life if mode == "max_age" else 0))
        headers = {"Nats-TTL": f"{life}s"} if mode == "ttl" else None
        written = 0
        began = time.perf_counter()
        counted_from, counted_at = began + life, 0

        async def worker() -> None:
            nonlocal written, counted_at
            while (now := time.perf_counter()) < counted_from + seconds:
                if now >= counted_from and not counted_at:
                    counted_at = written
                key = written // 3 if mode == "rollup" else written
                written += 1
                await js.publish(f"be.{key}", BODY, headers=headers)

        await asyncio.gather(*(worker() for _ in range(in_flight)))
        took = time.perf_counter() - counted_from
        state = (await js.stream_info("BENCH_EXPIRY")).state
        return {"msgs_per_s": (written - counted_at) / took, "written": written, "stored": state.messages,
                "removed": written - state.messages}
    finally:
        await nc.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--modes", default=",".join(MODES), help=f"among {', '.join(MODES)}")
    parser.add_argument("--life", type=int, default=4, help="seconds a message lives (TTL, max_age); whole")
    parser.add_argument("--seconds", type=float, default=16.0, help="measured, after the first `life` seconds")
    parser.add_argument("--in-flight", type=int, default=16, help="publishes awaiting their ack at once")
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    modes = args.modes.split(",")
    if unknown := [m for m in modes if m not in MODES]:
        parser.error(f"--modes: {', '.join(unknown)} unknown; give some of {', '.join(MODES)}")
    runs: dict[str, list[dict[str, float]]] = {mode: [] for mode in modes}
    for _ in range(args.reps):
        for mode in modes:
            with tempfile.TemporaryDirectory() as tmp:
                server = EmbeddedNats(Path(tmp) / "nats", sync_always=True)
                server.start()
                try:
                    runs[mode].append(asyncio.run(measure(server.url, mode, args.life, args.seconds,
                                                          args.in_flight)))
                finally:
                    server.stop()
    cases = {mode: {metric: summary([r[metric] for r in found]) for metric in found[0]}
             for mode, found in runs.items()}
    result = {"bench": "expiry", "sync_always": True, "n": args.reps, "life_s": args.life,
              "seconds_each": args.seconds, "in_flight": args.in_flight, "body_bytes": len(BODY), "cases": cases,
              "what": "one stream's acked publishes/s while it removes as many messages as it takes, by how"}
    if "kept" in cases:  # each way against nothing removed, the medians of the same window
        kept = cases["kept"]["msgs_per_s"]["median"]
        result["of_kept"] = {mode: round(c["msgs_per_s"]["median"] / kept, 3) for mode, c in cases.items()}
    emit(result)


if __name__ == "__main__":
    main()

"""Where an idle run's latency goes, hop by hop, from the server's own timestamps of each message.

One run at a time on an idle system (1 real agent running `true`, as bench/latency.py), watched from the side
without touching the services: JetStream stamps every stored message, so each hop is the gap between two stored
messages of the same run.

- Run records (KV_jc_runs), job records (KV_jc_jobs), run leases (KV_jc_leases) and reports (JC_EVENTS, a limits
  stream): ordered consumers started before the first submit; each message's metadata carries its stored time.
- PlaceRun (JC_PLACE) and AssignRun (JC_ASSIGN) live on work-queue streams, which refuse a second consumer and
  delete a message once acked. Their consumers' acks are plain publishes, though, to the reply subject the server
  delivered the message with, and that subject carries the message's stored time (`$JS.ACK.<stream>.<consumer>.
  <delivered>.<stream seq>.<consumer seq>.<ns>.<pending>`): a core subscription on `$JS.ACK.>` reads it. A core
  subscription on the subjects themselves is the fallback (our receipt time, counted in `fallbacks`). An
  assignment handed to its agent directly is stored nowhere: `assigned_to_lease` is then its hop, the `assigned`
  record to the claim the agent stores before it answers, where it claims first; a run due now that starts before
  its claim and ends within a quarter second stores none, and `assigned_to_spawned` (the agent's clock for the
  spawn) is its hop. A finish report handed to the tracker directly is not stored either: its moment is the agent's
  exit (agent clock), and `exited_to_succeeded` its hop.
- The agent's own clock (same host) gives the child's spawn and exit: a run shorter than START_REPORT_DELAY
  reports once, its finish carrying `started_at`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nats
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.js.api import ConsumerConfig, DeliverPolicy

from bench.common import emit, percentile, summary, system
from jetcron.bus.connect import Identity
from jetcron.bus.kv import drop_subscription
from jetcron.core.models import JobRecord, Run
from jetcron.sdk.client import Client
from jetcron.wire import subjects as s
from jetcron.wire.codec import decode
from jetcron.wire.messages import AssignRun, PlaceRun, RunFinished, RunStarted

HOPS: list[tuple[str, str, str]] = [
    ("submit_reply", "submit", "reply"),
    ("submit_to_created", "submit", "created"),
    (".api_submit_to_job_stored", "submit", "job"),
    (".trigger_job_to_created", "job", "created"),
    ("created_to_assigned", "created", "assigned"),
    (".created_to_place", "created", "place"),
    (".place_to_assigned", "place", "assigned"),
    ("assigned_to_assign", "assigned", "assign"),
    ("assigned_to_lease", "assigned", "lease"),
    ("assigned_to_spawned", "assigned", "spawned"),
    ("assign_to_started", "assign", "spawned"),
    (".agent_assign_to_lease", "assign", "lease"),
    (".agent_lease_to_spawned", "lease", "spawned"),
    ("started_to_finished", "spawned", "finished"),
    (".child_spawned_to_exited", "spawned", "exited"),
    (".agent_exited_to_report", "exited", "finished"),
    ("finished_to_succeeded", "finished", "succeeded"),
    ("exited_to_succeeded", "exited", "succeeded"),
    ("total", "submit", "succeeded"),
    ("observed", "submit", "observed"),
]
"""(name, from, to): moments of timeline(). A leading dot marks a part of the hop above it: the two parts of
created -> assigned exist only where a PlaceRun is written (a re-drive, or a service of the previous release);
with the record hand-off placement takes the run from its record, and nothing is stored between the two."""
_PARTS_OF_PLACING = (".created_to_place", ".place_to_assigned")
LEAVES = [h[0] for h in HOPS if h[0].startswith(".") and h[0] not in _PARTS_OF_PLACING] + [
    "created_to_assigned", "assigned_to_assign", "assigned_to_spawned", "finished_to_succeeded"]
"""The hops that add up to `total` (submit -> created -> ... -> succeeded), for blaming a slow run."""


@dataclass
class Seen:
    """One message the bench saw: its kind, the run (or job) it is about, the server's stored time, ours."""

    kind: str
    """job | run | lease | started | finished | ack:<stream> | msg:<stream>"""
    key: str
    server: float | None
    local: float
    data: dict[str, Any] = field(default_factory=dict)


def parse_ack(subject: str) -> tuple[str, int, float] | None:
    """(stream, stream sequence, the message's stored time) of a JetStream ack subject, both layouts."""
    t = subject.split(".")
    if t[:2] != ["$JS", "ACK"]:
        return None
    if len(t) == 9:  # $JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<ns>.<pending>
        stream, seq, ns = t[2], t[5], t[7]
    elif len(t) >= 11:  # $JS.ACK.<domain>.<account hash>.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<ns>...
        stream, seq, ns = t[4], t[7], t[9]
    else:
        return None
    return stream, int(seq), int(ns) / 1e9


def timeline(name: str, submit: float, reply: float, seen: list[Seen]) -> dict[str, float]:
    """Each moment of job `name`'s one run (epoch seconds): server-stored where the server stored it."""
    t = {"submit": submit, "reply": reply}
    job = [x for x in seen if x.kind == "job" and x.key == name]
    revisions = [x for x in seen if x.kind == "run" and x.data.get("job") == name]
    if not revisions:
        return t
    rid = revisions[0].key
    if job and job[0].server is not None:
        t["job"] = job[0].server
    for x in revisions:  # each state's first revision
        assert x.server is not None
        t.setdefault(x.data["state"] if x is not revisions[0] else "created", x.server)
        if x.data["state"] == "succeeded":
            t.setdefault("observed", x.local)
    end = t.get("succeeded", float("inf"))
    # Work-queue messages: by their ack's stored time, inside this run's own window (one run at a time).
    for moment, stream, start in (("place", s.STREAM_PLACE, t["created"]), ("assign", s.STREAM_ASSIGN,
                                                                            t.get("assigned", t["created"]))):
        acks = [x.server for x in seen if x.kind == f"ack:{stream}" and x.server is not None
                and start <= x.server <= end]
        if acks:
            t[moment] = min(acks)
        else:
            msgs = [x.local for x in seen if x.kind == f"msg:{stream}" and x.key == rid]
            if msgs:
                t[moment], t[f"{moment}_fallback"] = msgs[0], 1.0
    for kind, moment in (("lease", "lease"), ("started", "started_report"), ("finished", "finished")):
        first = next((x for x in seen if x.kind == kind and x.key == rid and x.server is not None), None)
        if first is None or first.server is None:
            continue
        t[moment] = first.server
        if kind == "started":
            t["spawned"] = first.data["at"]  # a report only a run longer than START_REPORT_DELAY sends
        elif kind == "finished":
            t["exited"] = first.data["at"]
            t.setdefault("spawned", first.data["started_at"] or t["exited"])
    done = next((x for x in revisions if x.data["state"] == "succeeded"), None)
    if "exited" not in t and done is not None and done.data["finished_at"] is not None:
        # Handed to the tracker directly: the record holds the report's times (the agent's clock).
        t["exited"] = done.data["finished_at"]
        t.setdefault("spawned", done.data["started_at"] or t["exited"])
    return t


def hops_ms(t: dict[str, float]) -> dict[str, float]:
    return {name: (t[b] - t[a]) * 1000 for name, a, b in HOPS if a in t and b in t}


def digest(runs: list[dict[str, float]]) -> dict[str, Any]:
    """p50/p99/mean of every hop over the runs, and the hop that holds the excess of each slow run."""
    out: dict[str, Any] = {}
    for name, _, _ in HOPS:
        values = [r[name] for r in runs if name in r]
        if values:
            out[name] = {"p50": percentile(values, 50), "p99": percentile(values, 99),
                         "mean": statistics.fmean(values), "max": max(values), "n": len(values)}
    medians = {k: v["p50"] for k, v in out.items()}
    # Slow: 10 ms over the median run. Blame the leaf hop furthest over its own median.
    slow = [r for r in runs if "total" in r and r["total"] > medians.get("total", 0.0) + 10]
    blame = Counter(max((h for h in LEAVES if h in r), key=lambda h: r[h] - medians.get(h, 0.0)) for r in slow)
    worst = max(range(len(runs)), key=lambda i: runs[i].get("total", 0.0), default=None)
    slowest = None if worst is None else {"run": worst, **{k: round(v, 2) for k, v in runs[worst].items()}}
    return {"hops_ms": out, "slow_runs": len(slow), "slow_runs_excess_in": dict(blame), "slowest": slowest}


class Recorder:
    """Subscriptions that note every message of interest with both clocks; started before the first submit."""

    def __init__(self, nc: NATS) -> None:
        self.nc = nc
        self.seen: list[Seen] = []
        self.done: dict[str, asyncio.Event] = {}
        self.subs: list[Any] = []

    async def start(self) -> None:
        js = self.nc.jetstream()
        for stream, subject, cb in ((s.kv_stream(s.BUCKET_JOBS), s.kv_subject(s.BUCKET_JOBS, ">"), self._job),
                                    (s.kv_stream(s.BUCKET_RUNS), s.RUN_CHANGES, self._run),
                                    (s.kv_stream(s.BUCKET_LEASES), s.kv_subject(s.BUCKET_LEASES, "run.>"),
                                     self._lease),
                                    (s.STREAM_EVENTS, s.EVENTS_ALL, self._event)):
            self.subs.append(await js.subscribe(subject, stream=stream, cb=cb, ordered_consumer=True,
                                                config=ConsumerConfig(deliver_policy=DeliverPolicy.NEW)))
        for subject, cb in (("$JS.ACK.>", self._ack), (s.PLACE_ALL, self._place), (s.ASSIGN_ALL, self._assign)):
            self.subs.append(await self.nc.subscribe(subject, cb=cb))

    async def stop(self) -> None:
        for sub in self.subs:
            await drop_subscription(self.nc.jetstream(), sub)

    def _note(self, kind: str, key: str, msg: Msg, **data: Any) -> None:
        meta = msg.metadata
        self.seen.append(Seen(kind, key, meta.timestamp.timestamp(), time.time(), {"seq": meta.sequence.stream,
                                                                                   **data}))

    def ack_check(self) -> dict[str, int]:
        """The method's own check: the stored time an ack subject carries against the same event's stored time
        from the ordered consumer (JC_EVENTS has both)."""
        stored = {x.data["seq"]: x.server for x in self.seen if x.kind in ("started", "finished")}
        acks = [(int(x.key), x.server) for x in self.seen if x.kind == f"ack:{s.STREAM_EVENTS}"]
        same = sum(1 for seq, at in acks if seq in stored and at is not None and abs(at - (stored[seq] or 0)) < 2e-6)
        return {"equal": same, "compared": sum(1 for seq, _ in acks if seq in stored)}

    async def _job(self, msg: Msg) -> None:
        if msg.data:
            self._note("job", decode(msg.data, JobRecord).spec.name, msg)

    async def _run(self, msg: Msg) -> None:
        if not msg.data:
            return
        run = decode(msg.data, Run)
        self._note("run", run.run_id, msg, job=run.job, state=run.state.value,
                   started_at=run.started_at.timestamp() if run.started_at else None,
                   finished_at=run.finished_at.timestamp() if run.finished_at else None)
        if run.state.terminal and run.job in self.done:
            self.done[run.job].set()

    async def _lease(self, msg: Msg) -> None:
        if msg.data and s.lease_writer(msg.subject):
            self._note("lease", msg.subject.split(".", 4)[4], msg)

    async def _event(self, msg: Msg) -> None:
        kind, _ = s.parse_event_subject(msg.subject)
        if kind == "finished":
            f = decode(msg.data, RunFinished)
            self._note("finished", f.run_id, msg, at=f.at.timestamp(), outcome=f.outcome,
                       started_at=f.started_at.timestamp() if f.started_at else None)
        elif kind == "started":
            e = decode(msg.data, RunStarted)
            self._note("started", e.run_id, msg, at=e.at.timestamp())

    async def _ack(self, msg: Msg) -> None:
        parsed = parse_ack(msg.subject)
        if parsed is not None and msg.data in (b"", b"+ACK"):
            self.seen.append(Seen(f"ack:{parsed[0]}", str(parsed[1]), parsed[2], time.time()))

    async def _place(self, msg: Msg) -> None:
        self.seen.append(Seen(f"msg:{s.STREAM_PLACE}", decode(msg.data, PlaceRun).run_id, None, time.time()))

    async def _assign(self, msg: Msg) -> None:
        self.seen.append(Seen(f"msg:{s.STREAM_ASSIGN}", decode(msg.data, AssignRun).run_id, None, time.time()))


async def write_rtt_ms(js: Any, n: int = 100) -> float:
    """Median round trip of one acknowledged publish, one at a time: what each stored write on the path costs."""
    await js.add_stream(name="BENCH_HOPS_RTT", subjects=["bench.hops.rtt"])
    times = []
    for _ in range(n):
        start = time.perf_counter()
        await js.publish("bench.hops.rtt", b"x" * 64)
        times.append((time.perf_counter() - start) * 1000)
    await js.delete_stream("BENCH_HOPS_RTT")
    return statistics.median(times)


async def measure(url: str, n: int, gap: float, identity: Identity | None = None) -> dict[str, Any]:
    identity = identity or Identity()
    client = await Client.connect(url, timeout=30, identity=identity)
    nc = await nats.connect(url, **identity.options())
    recorder = Recorder(nc)
    await recorder.start()
    moments: list[tuple[str, float, float]] = []
    for i in range(n):
        name = f"hop{i}"
        done = recorder.done[name] = asyncio.Event()
        submit = time.time()
        await client.call("jobs.create", {"spec": {"name": name, "command": ["true"],
                                                   "resources": {"cpu": 0.001, "memory_mb": 1}}})
        reply = time.time()
        await asyncio.wait_for(done.wait(), timeout=30)
        moments.append((name, submit, reply))
        await asyncio.sleep(gap)  # the tracker's ack and the agent's last writes land before the next submit
    await asyncio.sleep(0.2)
    await recorder.stop()
    timelines = [timeline(name, submit, reply, recorder.seen) for name, submit, reply in moments]
    rtt = await write_rtt_ms(nc.jetstream())
    await client.close()
    await nc.close()
    states = Counter(x.data["state"] for x in recorder.seen if x.kind == "run")
    return {**digest([hops_ms(t) for t in timelines]), "write_rtt_p50_ms": rtt,
            "fallbacks": sum(int(t.get("place_fallback", 0) + t.get("assign_fallback", 0)) for t in timelines),
            "revisions": dict(states), "started_reports": sum(1 for x in recorder.seen if x.kind == "started"),
            "ack_timestamp_check": recorder.ack_check()}


def _limits(base: Path) -> str:
    """How the agent confined its children (cgroup2, rlimit...): from its ready line."""
    for line in (base / "agent-1.log").read_text(errors="replace").splitlines():
        if "agent ready" in line and line.startswith("{"):
            return str(json.loads(line).get("limits", "?"))
    return "?"


def run(n: int, reps: int, sync_always: bool, gap: float, spare: bool) -> dict[str, Any]:
    per_rep: list[dict[str, Any]] = []
    name = "idle_hops" if spare else "idle_hops_no_spare"
    for rep in range(reps):
        with system(sync_always=sync_always, agents=1, agent_env={"JETCRON_AGENT_SPARE": str(spare).lower()}) as jc:
            result = asyncio.run(measure(jc.url, n, gap))
            limits = _limits(jc.base)
        result = {"bench": name, "rep": rep + 1, "sync_always": sync_always, "runs": n, "agent_spare": spare,
                  "agent_limits": limits, **result}
        emit(result)  # one line per repetition; bench.run keeps the last line of a name, the summary below
        per_rep.append(result)
    out: dict[str, Any] = {"bench": name, "sync_always": sync_always, "runs": n, "reps": reps,
                           "agent_spare": spare, "agent_limits": per_rep[-1]["agent_limits"],
                           "write_rtt_p50_ms": summary([r["write_rtt_p50_ms"] for r in per_rep])}
    for name, _, _ in HOPS:
        for q in ("p50", "p99"):
            values = [r["hops_ms"][name][q] for r in per_rep if name in r["hops_ms"]]
            if values:
                out[f"{name.lstrip('.')}_{q}_ms"] = summary(values)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--gap", type=float, default=0.02, help="seconds between a run's end and the next submit")
    parser.add_argument("--sync", choices=("always", "default", "both"), default="always")
    parser.add_argument("--spare", choices=("on", "off", "both"), default="on",
                        help="the agent's spare child (JETCRON_AGENT_SPARE); both: off, then on, to compare")
    args = parser.parse_args()
    for sync in {"always": (True,), "default": (False,), "both": (True, False)}[args.sync]:
        for spare in {"on": (True,), "off": (False,), "both": (False, True)}[args.spare]:
            emit(run(args.runs, args.reps, sync, args.gap, spare))


if __name__ == "__main__":
    main()

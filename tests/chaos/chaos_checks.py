"""Chaos workload and invariant checker: submit runs of the chaos job, read back every run record and the job's own
logs, and check the invariants of the design (DESIGN.md §3): no lost run, no duplicate committed effect, one
terminal record per run, non-decreasing fencing tokens, acked ⇒ durable, bounded recovery."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import sys
import time
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import nats
from chaos_figures import Figures
from harness import Services, wait_for

from jetcron.bus.kv import drop_subscription
from jetcron.bus.server import ServerNode
from jetcron.core.models import Run, RunState
from jetcron.sdk.client import ApiError, Client
from jetcron.wire import subjects as s
from jetcron.wire.codec import decode

JOB = Path(__file__).with_name("chaos_job.py")
# R3 for every stream and bucket, whatever the services count from the server's INFO.
CHAOS_ENV = {"JETCRON_REPLICAS": "3"}
READY = {"api": "api ready", "placement": "placement ready", "run_tracker": "run tracker ready",
         "trigger": "trigger ready", "agent": "agent ready", "notifier": "notifier ready",
         "gateway": "gateway ready"}


def chaos_job(name: str, out: Path, *, first_sleep: float = 0.0, later_sleep: float = 0.0,
              gate: Path | None = None, **spec: Any) -> dict[str, Any]:
    """The chaos job's spec; with `gate`, attempt 1 waits for that file before its first sleep."""
    spec.setdefault("schedule", {"kind": "now"})
    spec.setdefault("resources", {"memory_mb": 256, "cpu": 0.01})
    # Faults can fail an attempt (storage gone mid-effect): a generous budget keeps "dead" for real losses.
    spec.setdefault("retry", {"max_attempts": 10, "initial_seconds": 0.5, "max_delay_seconds": 2})
    argv = [sys.executable, str(JOB), str(out), str(first_sleep), str(later_sleep)]
    return {"spec": {"name": name, "command": argv + ([str(gate)] if gate else []), **spec}}


async def start(services: Services, name: str, module: str, **env: str) -> None:
    """Start one more service or agent (a restart takes a new name: log files are per name) and wait for it."""
    await services.start(name, module, **CHAOS_ENV, **env).wait_logged(READY[module], 40)


async def start_system(services: Services, *, agents: int = 2, faults: dict[str, str] | None = None,
                       agent_env: dict[str, dict[str, str]] | None = None) -> None:
    """api, trigger-1, placement, run_tracker and N agents; `faults` maps a service name to its JETCRON_FAULT."""
    faults = faults or {}
    agent_env = agent_env or {}

    def env(name: str) -> dict[str, str]:
        extra = {**CHAOS_ENV, **agent_env.get(name, {})}
        if name in faults:
            extra["JETCRON_FAULT"] = faults[name]
        return extra

    procs = [services.start("api", "api", **env("api")),
             services.start("trigger-1", "trigger", JETCRON_AGENT_ID="trigger-1", **env("trigger-1")),
             services.start("placement", "placement", **env("placement")),
             services.start("run_tracker", "run_tracker", **env("run_tracker"))]
    procs += [services.start(f"agent-{i}", "agent", JETCRON_AGENT_ID=f"agent-{i}", **env(f"agent-{i}"))
              for i in range(1, agents + 1)]
    await asyncio.gather(*(p.wait_logged(READY[p.argv[-1].rsplit(".", 1)[-1]], 45) for p in procs))


async def submit_all(client: Client, bodies: list[dict[str, Any]], *, concurrency: int = 16,
                     deadline: float = 30.0) -> list[str]:
    """Create each job, retrying retryable refusals (a fault may be on); the names the API acknowledged."""
    gate = asyncio.Semaphore(concurrency)
    acked: list[str] = []
    until = time.monotonic() + deadline

    async def one(body: dict[str, Any]) -> None:
        async with gate:
            key = f"chaos-{body['spec']['name']}"
            while True:
                try:
                    await client.call("jobs.create", {**body, "idempotency_key": key})
                    acked.append(body["spec"]["name"])
                    return
                except ApiError as exc:
                    # Retryable includes "being used by a concurrent request": our earlier try whose answer was lost
                    if not exc.retryable or time.monotonic() > until:
                        raise
                    await asyncio.sleep(0.3)

    await asyncio.gather(*(one(b) for b in bodies))
    return acked


async def read_runs(url: str, prefix: str = "") -> dict[str, Run]:
    """Every run record (optionally of jobs whose name starts with `prefix`), straight from the runs bucket."""
    nc = await nats.connect(url.split(","))
    try:
        kv = await nc.jetstream(timeout=10).key_value(s.BUCKET_RUNS)
        watcher = await kv.watch(">")
        runs: dict[str, Run] = {}
        try:
            async for entry in watcher:
                if entry is None:
                    break
                if entry.value and entry.key.startswith(prefix):
                    runs[entry.key] = decode(entry.value, Run)
        finally:
            # Polled twice a second: a stopped watch leaves its consumer for minutes (about a hundred per test).
            await drop_subscription(nc.jetstream(), watcher._sub)
        return runs
    finally:
        await nc.close()


async def all_terminal(url: str, prefix: str, count: int, timeout: float) -> tuple[dict[str, Run], float]:
    """Wait until `count` runs of the prefix are terminal; the runs and the seconds it took."""
    started = time.monotonic()
    last: dict[str, Run] = {}
    failed: list[str] = []
    """Why the last read failed, if it did (a failure must say whether the runs or the reads were stuck)."""

    async def done() -> bool:
        nonlocal last
        try:
            last = await read_runs(url, prefix)
        except Exception as exc:
            failed[:] = [repr(exc)]
            raise
        failed.clear()
        return len(last) >= count and all(r.state.terminal for r in last.values())

    try:
        # (reading thousands of records is load of its own: look less often then)
        await wait_for(done, timeout, interval=0.5 if count < 200 else 3.0, ignore=(Exception,),
                       what=f"{count} runs of {prefix} to end")
    except AssertionError:
        pending = {k: (r.state, r.attempt, r.reason) for k, r in last.items() if not r.state.terminal}
        read = f"; the last read failed: {failed[0]}" if failed else ""
        raise AssertionError(f"runs not terminal after {timeout:g}s: {len(last)} seen, pending {pending}{read}") \
            from None
    return last, time.monotonic() - started


def exit_time(services: Services, name: str, timeout: float = 40) -> asyncio.Task[datetime]:
    """When the process exits (watched from now on, in a thread): the instant, for delay figures."""

    def wait() -> datetime:
        services[name].wait_exit(timeout)
        return datetime.now(UTC)

    return asyncio.ensure_future(asyncio.to_thread(wait))


def log_lines(path: Path) -> list[list[str]]:
    return [line.split() for line in path.read_text().splitlines()] if path.exists() else []


@dataclass
class Verdict:
    runs: int = 0
    lost: list[str] = field(default_factory=list)
    """Expected runs with no terminal record in the expected state, or a succeeded run without its effect."""
    duplicates: dict[str, int] = field(default_factory=dict)
    """Run id -> committed effects beyond the first."""
    terminal: list[str] = field(default_factory=list)
    """Runs with more than one record for one occurrence, or an attempt recorded after the terminal one."""
    tokens: list[str] = field(default_factory=list)
    """Runs whose fencing tokens did not grow with the attempt number."""
    missing: list[str] = field(default_factory=list)
    """Acknowledged jobs that are gone after the fault healed."""

    @property
    def duplicate_count(self) -> int:
        return sum(self.duplicates.values())

    def assert_ok(self) -> None:
        problems = {k: v for k, v in (("lost", self.lost), ("duplicates", self.duplicates),
                                      ("terminal", self.terminal), ("tokens", self.tokens),
                                      ("missing", self.missing)) if v}
        assert not problems, f"invariants broken: {problems}"


def check(runs: dict[str, Run], out: Path, *, jobs: list[str], expect: RunState = RunState.SUCCEEDED,
          one_run_per_job: bool = True, effects_expected: bool = True) -> Verdict:
    """Check every invariant that can be read from the records and the job's own logs."""
    v = Verdict(runs=len(runs))
    by_job: dict[str, list[Run]] = defaultdict(list)
    for run in runs.values():
        by_job[run.job].append(run)
    effects = Counter(line[0] for line in log_lines(out / "effects.log"))
    for job in jobs:
        found = by_job.get(job, [])
        if not found:
            v.lost.append(f"{job}: no run")
        if one_run_per_job and len(found) > 1:
            v.terminal.append(f"{job}: {len(found)} runs for one occurrence")
        stamps = Counter(r.scheduled_at for r in found)
        v.terminal += [f"{job}: {n} runs at {at}" for at, n in stamps.items() if n > 1]
    for run in runs.values():
        if run.state is not expect:
            v.lost.append(f"{run.run_id}: {run.state} ({run.reason})")
        if effects_expected and run.state is RunState.SUCCEEDED and effects[run.run_id] == 0:
            v.lost.append(f"{run.run_id}: succeeded without its effect")
        if effects[run.run_id] > 1:
            v.duplicates[run.run_id] = effects[run.run_id] - 1
        outcomes = [a.outcome for a in run.history]
        if outcomes.count("succeeded") > 1 or ("succeeded" in outcomes and outcomes[-1] != "succeeded"):
            v.terminal.append(f"{run.run_id}: attempts {outcomes}")
        tokens = [a.token for a in run.history if a.token]
        if tokens != sorted(set(tokens)):
            v.tokens.append(f"{run.run_id}: record tokens {tokens}")
    seen: dict[str, dict[int, set[int]]] = defaultdict(lambda: defaultdict(set))
    for run_id, attempt, token, *_ in log_lines(out / "attempts.log"):
        seen[run_id][int(attempt)].add(int(token))
    for run_id, attempts in seen.items():
        order = [sorted(attempts[a]) for a in sorted(attempts)]
        flat = [t for ts in order for t in ts]
        if any(len(ts) > 1 for ts in order) or flat != sorted(flat) or len(set(flat)) != len(flat):
            v.tokens.append(f"{run_id}: executed tokens by attempt {order}")
    return v


READ_BACK_DEADLINE = 60.0


async def missing_jobs(client: Client, names: list[str]) -> list[str]:
    """Acked ⇒ durable: every acknowledged job is still there. Only `not_found` counts as gone; a retryable
    answer (a bucket whose leader is still moving after the fault, 10008) is asked again until the deadline,
    then raised."""
    gone = []
    deadline = time.monotonic() + READ_BACK_DEADLINE
    for name in names:
        while True:
            try:
                await client.call("jobs.get", {"name": name})
            except ApiError as exc:
                if exc.code == "not_found":
                    gone.append(name)
                elif not exc.retryable or time.monotonic() > deadline:
                    raise
                else:
                    await asyncio.sleep(0.2)
                    continue
            break
    return gone


def redispatch_delays(runs: dict[str, Run], since: datetime) -> list[float]:
    """Seconds from the fault to the start of the attempt that replaced a lost one."""
    delays = []
    for run in runs.values():
        for lost, nxt in itertools.pairwise(run.history):
            if lost.outcome in ("lost", "not_started") and nxt.started_at is not None:
                delays.append((nxt.started_at - since) / timedelta(seconds=1))
    return delays


LOAD = 16
SETTLE_S = 90


async def _started(services: Services) -> int:
    try:
        return len(await read_runs(services.server.url))
    except Exception:
        return 0


@contextlib.asynccontextmanager
async def loaded(services: Services, out: Path, prefix: str, figures: Figures, *, n: int = LOAD,
                 first_sleep: float = 1.0, deadline: float = 60) -> AsyncIterator[Callable[[], Awaitable[None]]]:
    """Submit n chaos jobs (retrying refusals while a fault is on) and wait for the first runs; yields `settle`,
    to call once the fault is over: every acknowledged job runs once and succeeds, and the figures are kept."""
    client = await Client.connect(services.server.url, timeout=15)
    jobs = [f"{prefix}-{i}" for i in range(n)]
    load = asyncio.create_task(submit_all(client, [chaos_job(j, out, first_sleep=first_sleep) for j in jobs],
                                          concurrency=4, deadline=deadline))
    try:
        await wait_for(lambda: _started(services), 30, what="the first runs")

        async def settle() -> None:
            healed = time.monotonic()
            acked = await load
            runs, _ = await all_terminal(services.server.url, f"{prefix}-", len(jobs), SETTLE_S)
            verdict = check(runs, out, jobs=jobs)
            verdict.missing = await missing_jobs(client, acked)
            figures["acked"], figures["runs"] = len(acked), len(runs)
            figures["lost"], figures["duplicates"] = len(verdict.lost), verdict.duplicate_count
            figures["attempts_max"] = max(r.attempt for r in runs.values())
            figures["recovery_s"] = time.monotonic() - healed
            verdict.assert_ok()
            assert sorted(acked) == sorted(jobs)

        yield settle
    finally:
        load.cancel()
        with contextlib.suppress(BaseException):
            await load
        await client.close()


def _urls(nodes: list[ServerNode]) -> list[str]:
    return [f"nats://127.0.0.1:{n.port}" for n in nodes]


async def leader_of(nodes: list[ServerNode], stream: str) -> str:
    """The name of the node leading `stream`, asked of `nodes` only (a paused node would hang the question)."""
    nc = await nats.connect(_urls(nodes), connect_timeout=2, max_reconnect_attempts=2)
    try:
        info = await nc.jetstream(timeout=5).stream_info(stream)
    finally:
        await nc.close()
    assert info.cluster is not None and info.cluster.leader
    return info.cluster.leader


async def new_leader(nodes: list[ServerNode], old: str) -> str | None:
    with contextlib.suppress(Exception):
        leader = await leader_of(nodes, f"KV_{s.BUCKET_RUNS}")
        return leader if leader != old else None
    return None

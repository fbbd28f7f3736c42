"""History the server cannot age out by itself: a job's count limits (keep_succeeded, keep_failed), and storage
pressure (the oldest finished runs let go before their time so that new occurrences are still recorded). The
steady state needs neither: every ended run, event and output chunk carries its own TTL
(jetcron.core.lifecycle.retention)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import NamedTuple

from jetcron.bus import storage
from jetcron.bus.topology import stream_names
from jetcron.core.errors import JetcronError, NotFound
from jetcron.core.lifecycle.retention import Ended, counts, gate_seconds, may_shed, one_shot, over_count, to_free
from jetcron.core.models import JobSpec, Run
from jetcron.telemetry import metrics
from jetcron.wire import subjects as s
from jetcron_services.run_tracker.ports import PrunerPorts, StorageKeeperPorts

PRUNE_AFTER = 5.0
"""Seconds a job waits after one of its runs ended before its count limits are applied: a job whose runs end
together is read once for all of them."""
SHED_WALK = 20_000
"""Records looked at per storage check at most: a check is never a walk through a whole bucket at once."""
SHED_BATCH = 64
"""Runs let go at once (two purges each): one at a time, 3,000 runs took longer than the leader's lease."""
EVENTS_SHARE = 0.2
"""The oldest share of the events stream let go under pressure (only what the tracker has consumed)."""


class Pruner:
    """Applies a job's count limits after its runs end (on the replica that recorded the end). Ended runs never
    change, so each is read once and remembered until it is gone."""

    def __init__(self, ctx: PrunerPorts, monotonic: Callable[[], float] = time.monotonic) -> None:
        self.ctx = ctx
        self._monotonic = monotonic
        self._due: dict[str, float] = {}
        self._specs: dict[str, JobSpec] = {}
        """Per job due for a prune, the spec of the run that made it due: its count limits, without a read."""
        self._ended: dict[str, dict[str, Ended]] = {}
        """Per job, its ended runs read so far: a prune looks at its own job's, not at every job's (a walk over all
        of them per prune was the tracker's hottest frame at 6,000 one-shot jobs, 0.2 ms per run)."""
        self.wake = asyncio.Event()

    def noted(self, run: Run) -> None:
        """A run ended: its job's limits are applied soon, if it has any."""
        if run.spec is None or not self.ctx.history.may_count(run.spec):
            return
        # Ended runs never change: the record in hand is the one a prune would read back (a read per ended run of a
        # job with count limits, and a read of the job for its spec).
        self._ended.setdefault(run.job, {})[run.run_id] = self._known(run)
        self._specs[run.job] = run.spec
        self._due.setdefault(run.job, self._monotonic() + PRUNE_AFTER)
        self.wake.set()

    def _known(self, run: Run) -> Ended:
        return Ended(run_id=run.run_id, state=run.state, finished_at=run.finished_at,
                     gate_seconds=gate_seconds(run.spec, self.ctx.history.cluster))

    async def run(self) -> None:
        while not self.ctx.stop.is_set():
            now = self._monotonic()
            due = [job for job, at in self._due.items() if at <= now]
            for job in due:
                self._due.pop(job, None)
                try:
                    await self.prune(job, self.ctx.clock.now(), self._specs.pop(job, None))
                except JetcronError as exc:
                    self.ctx.log.warning("count limits not applied; next time one of its runs ends", job=job,
                                         error=str(exc))
            self.wake.clear()
            wait = min((at for at in self._due.values()), default=now + 60.0) - self._monotonic()
            try:
                await asyncio.wait_for(self.wake.wait(), timeout=max(0.05, wait))
            except TimeoutError:
                pass

    async def prune(self, job: str, now: datetime, spec: JobSpec | None = None) -> list[str]:
        """Let go of the job's ended runs beyond its count limits (the job's `spec` when known, else read); the run
        ids let go."""
        policy = None if spec is None else await self.ctx.history.policy(spec)
        if policy is not None and not counts(policy):
            # No count limit after all (its tenant's policy, unknown when its runs ended, says none): nothing to list
            # or keep. A fresh tracker notes every ending as possibly limited until it has read the tenant.
            self._ended.pop(job, None)
            return []
        keys = await self.ctx.runs.keys(s.runs_of_job_filter(job))
        runs: list[Ended] = []
        ended = self._ended.setdefault(job, {})
        for key in keys:
            known = ended.get(key)
            if known is None:
                found = await self.ctx.runs.maybe(key)
                if found is None or not found[0].state.terminal:
                    continue
                run = found[0]
                spec = spec or run.spec
                known = ended[key] = self._known(run)
            runs.append(known)
        if spec is None:
            found_job = await self.ctx.jobs.maybe(job)
            if found_job is None:
                if not ended:
                    self._ended.pop(job, None)
                return []
            spec = found_job[0].spec
        let_go = over_count(runs, policy or await self.ctx.history.policy(spec), now)
        for run_id in let_go:
            await storage.remove_run(self.ctx.streams, run_id)
            ended.pop(run_id, None)
            metrics.HISTORY_PRUNED.inc()
        present = set(keys)
        for key in [k for k in ended if k not in present]:
            del ended[key]  # gone by its TTL
        if not ended or one_shot(spec):
            # A one-shot job is pruned once: what is kept of it would only wait for a prune that never comes (a
            # manual run's end makes one, which reads its runs again).
            self._ended.pop(job, None)
        return let_go


class Walk(NamedTuple):
    """What one walk through the runs bucket let go: runs, and their bytes as the bucket counted them."""

    removed: int
    freed: int


class StorageKeeper:
    """Run by the tracker leader: every storage_check_seconds, each stream's and the server's headroom as metrics;
    at or above storage_shed_at, history let go oldest first."""

    def __init__(self, ctx: StorageKeeperPorts, monotonic: Callable[[], float] = time.monotonic) -> None:
        self.ctx = ctx
        self.monotonic = monotonic
        self.every = timedelta(seconds=ctx.settings.storage_check_seconds)
        self.last: datetime | None = None
        self.streams = stream_names()
        self.behind = False
        """The last walk stopped at its time budget with room still wanted: the next pass checks again at once."""
        self.server_owed: int | None = None
        """Bytes the server's store still wanted let go when the last walk was cut short (0: none left). The next
        pass, coming at once, goes on with them instead of asking the server again: its figure (/jsz) falls behind
        purges (file blocks are compacted later), so each pass read the same pressure and let more go, far past the
        line. None: the next pass asks the server (a check due by the clock always does)."""
        self.walked_to = 0
        """The runs bucket's sequence the last walk stopped at: the next goes on from there, so that a long run of
        records that may not go (dead runs kept for their dead letters, live ones) at the bucket's start does not
        hide the ones behind it; back to the start once a walk reaches the end."""

    def forget(self) -> None:
        """Leadership lost: the next leader speaks for the headroom (a stale figure would keep an alert on)."""
        for gauge in (metrics.STORAGE_USED, metrics.STORAGE_LIMIT, metrics.STORAGE_USED_RATIO):
            metrics.forget(gauge)
        self.last = None

    async def maybe_check(self, now: datetime) -> None:
        due = self.last is None or now - self.last >= self.every
        if not due and not self.behind:
            return
        if due:
            self.server_owed = None
        self.last = now
        try:
            await self.check(now)
        except JetcronError as exc:
            self.ctx.log.warning("storage check failed; next time", error=str(exc))

    async def check(self, now: datetime) -> dict[str, int]:
        """Export the headroom, shed what pressure asks; bytes (or messages) let go, by stream."""
        self.behind = False
        usages = await storage.stream_usages(self.ctx.streams, self.streams)
        server = await storage.server_usage(self.ctx.settings.nats_url, self.ctx.settings.nats_monitor_url, usages)
        for usage in [*usages, *([server] if server is not None else [])]:
            metrics.child(metrics.STORAGE_USED, stream=usage.stream).set(usage.used)
            metrics.child(metrics.STORAGE_LIMIT, stream=usage.stream).set(usage.limit)
            metrics.child(metrics.STORAGE_USED_RATIO, stream=usage.stream).set(usage.ratio)
        shed_at = self.ctx.settings.storage_shed_at
        by_name = {u.stream: u for u in usages}
        # A pass that goes on with what the server still wanted does not cut the events and the output again.
        going_on = self.server_owed is not None
        if self.server_owed is not None:
            server_free = self.server_owed
        else:
            server_free = to_free(server.used, server.limit, shed_at) if server is not None else 0
        self.server_owed = None
        shed: dict[str, int] = {}
        runs = by_name.get(s.kv_stream(s.BUCKET_RUNS))
        want = max(server_free, to_free(runs.used, runs.limit, shed_at) if runs is not None else 0)
        if want:
            walk = await self._shed_runs(want, now)
            shed[s.BUCKET_RUNS] = walk.removed
            if self.behind:
                self.server_owed = max(0, server_free - walk.freed)
        events = by_name.get(s.STREAM_EVENTS)
        if events is not None and ((server_free and not going_on) or to_free(events.used, events.limit, shed_at)):
            shed[s.STREAM_EVENTS] = await self._shed_events(events)
        logs = by_name.get(s.STREAM_LOGS)
        # (full on its own, the output stream drops its oldest itself)
        if logs is not None and server_free and not going_on:
            cut = logs.first_seq + int(logs.messages * EVENTS_SHARE)
            if cut > logs.first_seq:
                await self.ctx.streams.purge(s.STREAM_LOGS, below=cut)
                shed[s.STREAM_LOGS] = cut - logs.first_seq
        for stream, amount in shed.items():
            if amount:
                metrics.child(metrics.HISTORY_SHED, stream=stream).inc(amount)
                self.ctx.log.warning("storage pressure: history let go before its retention", stream=stream,
                                     amount=amount, shed_at=shed_at)
        return shed

    async def _shed_runs(self, want: int, now: datetime) -> Walk:
        """Ended runs past their gate, the longest unwritten first, until `want` bytes are free: how many, how much.

        A pass stops at a third of the leader's lease TTL, however much is still wanted: the leader's loop renews
        its lease between passes, and a pass that outlasted it (thousands of runs let go one by one) lost the
        lease after every pass, and the sweeps with it. The next pass then comes at once (`behind`) if this one
        let something go."""
        freed = removed = walked = 0
        cluster = self.ctx.history.cluster
        reached, start = 0, self.walked_to
        deadline = self.monotonic() + self.ctx.settings.leader_lease_ttl / 3
        batch: list[str] = []

        async def let_go() -> None:
            for result in await asyncio.gather(*(storage.remove_run(self.ctx.streams, key) for key in batch),
                                               return_exceptions=True):
                if isinstance(result, BaseException) and not isinstance(result, NotFound):
                    raise result
            batch.clear()

        async for key, run, size, seq in self.ctx.streams.oldest(s.BUCKET_RUNS, Run, after=start):
            walked, reached = walked + 1, seq
            if may_shed(run, now, cluster):
                batch.append(key)
                freed += size
                removed += 1
            if len(batch) >= SHED_BATCH:
                await let_go()
            late = self.monotonic() > deadline
            if freed >= want or walked >= SHED_WALK or late:
                await let_go()
                self.walked_to = reached
                # Only a walk that let something go comes again at once: one that found nothing to let go (a store
                # full of what may not go) waits for the next check rather than walk again and again.
                self.behind = late and freed < want and removed > 0
                return Walk(removed, freed)
        await let_go()
        self.walked_to = 0  # the end: the next walk starts again from the oldest
        return Walk(removed, freed)

    async def _shed_events(self, events: storage.Usage) -> int:
        """The oldest share of the events stream that the tracker has consumed; the count."""
        floor = (await self.ctx.streams.consumer(s.STREAM_EVENTS, s.CONSUMER_TRACKER)).ack_floor
        cut = min(floor + 1, events.first_seq + int(events.messages * EVENTS_SHARE))
        if cut <= events.first_seq:
            return 0
        await self.ctx.streams.purge(s.STREAM_EVENTS, below=cut)
        return cut - events.first_seq

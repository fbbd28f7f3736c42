"""The run tracker: apply agent events by CAS; the reconciler leader re-drives stalled runs and retries."""

from __future__ import annotations

import asyncio
import contextlib
import random
import secrets
import time

from jetcron.bus.lease import HeldLease
from jetcron.core.errors import JetcronError
from jetcron.core.finished import FinishedMinute
from jetcron.core.models import Run
from jetcron.services.run_tracker.agents import AgentLosses
from jetcron.services.run_tracker.checkpoints import CheckpointJanitor
from jetcron.services.run_tracker.deadlines import Deadlines
from jetcron.services.run_tracker.events import EventHandler, report_router
from jetcron.services.run_tracker.finished import FinishedCounts
from jetcron.services.run_tracker.flows import Flows
from jetcron.services.run_tracker.history import Pruner, StorageKeeper
from jetcron.services.run_tracker.listing import serve_listing
from jetcron.services.run_tracker.reconciler import Reconciler
from jetcron.services.run_tracker.records import Records
from jetcron.services.runtime import Context, background
from jetcron.telemetry import metrics
from jetcron.wire import subjects as s

SWEEP_SECONDS = 0.25


async def reconcile_as_leader(ctx: Context, reconciler: Reconciler, janitor: CheckpointJanitor,
                              deadlines: Deadlines, keeper: StorageKeeper, flows: Flows,
                              losses: AgentLosses, finished: FinishedCounts) -> None:
    """Every replica keeps the index; only the lease holder sweeps (a second sweeper only wastes work)."""
    leader = HeldLease(ctx.leases, s.TRACKER_LEADER_KEY, f"tracker-{secrets.token_hex(4)}",
                       ctx.settings.leader_lease_ttl)
    won: float | None = None
    await reconciler.synced.wait()
    while not ctx.stop.is_set():
        try:
            if leader.held:
                # Sweeps come more often than renewals are needed; a renewal failing past 2/3 of the TTL gives
                # the lease up, and the sweeps stop with it (another replica may be sweeping by then).
                if not await leader.keep():
                    ctx.log.warning("tracker leadership lost", why=leader.why_dropped)
                    deadlines.lost_lead()
                    keeper.forget()
                    losses.lost_lead()
            elif await leader.take():
                won = time.monotonic()
                metrics.child(metrics.TAKEOVERS, kind="tracker_leader").inc()
                ctx.log.info("tracker leader", replica=leader.holder)
        except JetcronError as exc:
            ctx.log.warning("tracker lease error", error=str(exc))
        metrics.child(metrics.LEASES_HELD, kind="tracker_leader").set(1 if leader.held else 0)
        if leader.held:
            await reconciler.sweep(ctx.clock.now())
            await janitor.maybe_sweep(ctx.clock.now())
            await deadlines.maybe_sweep(ctx.clock.now())
            await keeper.maybe_check(ctx.clock.now())
            await flows.maybe_expire_waits(reconciler.active, ctx.clock.now())
            # A sweep done is the leader's action: its lease carries the time, and the first since winning
            # measures the takeover gap from the previous holder's last one (core/takeover.py).
            gap = leader.acted(ctx.clock.now())
            if gap is not None:
                metrics.child(metrics.TAKEOVER_GAP, kind="tracker_leader").observe(gap)
            if won is not None:  # ready once the first sweep is done
                metrics.child(metrics.TAKEOVER_DURATION, kind="tracker_leader").observe(time.monotonic() - won)
                won = None
        with contextlib.suppress(JetcronError):
            await losses.maybe_check(leader.held)
        await finished.maybe_flush(ctx.clock.now(), write=leader.held)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(ctx.stop.wait(), timeout=SWEEP_SECONDS)
    await leader.release()


async def main(ctx: Context) -> None:
    flows = Flows(ctx)
    pruner = Pruner(ctx)

    async def ended(run: Run) -> None:
        pruner.noted(run)
        await flows.on_terminal(run)

    records = Records(ctx, random.Random(), on_terminal=ended)
    handler = EventHandler(records)
    reconciler = Reconciler(ctx, records)
    records.known = reconciler.known
    finished = FinishedCounts(ctx, await ctx.buckets.open(s.BUCKET_FINISHED, FinishedMinute))
    reconciler.ended = finished.noted
    losses = AgentLosses(ctx)
    reconciler.progress.watched = losses.beats
    stop = asyncio.Event()
    tasks = [background(ctx, t) for t in (
        flows.watch_jobs(), reconciler.watch(), pruner.run(), losses.watch(),
        ctx.consumers.consume(s.STREAM_EVENTS, s.CONSUMER_TRACKER, handler.handle, stop=stop, concurrency=256),
        reconcile_as_leader(ctx, reconciler, CheckpointJanitor(ctx), Deadlines(ctx, reconciler.active, flows.jobs),
                            StorageKeeper(ctx), flows, losses, finished),
        serve_listing(ctx, reconciler.active, reconciler.synced))]
    # Any replica applies a report (the record's CAS decides), so one member of the group takes each.
    direct = await ctx.rpc.serve(s.REPORT_ALL, report_router(handler), queue="run_tracker", flush=True)
    ctx.ready.set()
    ctx.log.info("run tracker ready")
    await ctx.stop.wait()
    await direct.unsubscribe()  # a report being applied still gets its answer; new ones go to the stream
    stop.set()
    for task in tasks[:4]:  # the watches and the pruner end only when cancelled
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)

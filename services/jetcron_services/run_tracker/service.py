"""The run tracker: apply agent events by CAS; the reconciler leader re-drives stalled runs and retries."""

from __future__ import annotations

import asyncio
import contextlib
import random
import secrets
import time
from collections.abc import Awaitable, Callable

from jetcron.bus.lease import HeldLease
from jetcron.core.errors import JetcronError
from jetcron.core.lifecycle.finished import FinishedMinute
from jetcron.telemetry import metrics
from jetcron.wire import subjects as s
from jetcron_services.run_tracker.agents import AgentLosses
from jetcron_services.run_tracker.checkpoints import CheckpointJanitor
from jetcron_services.run_tracker.deadlines import Deadlines
from jetcron_services.run_tracker.events import EventHandler, report_router
from jetcron_services.run_tracker.finished import FinishedCounts
from jetcron_services.run_tracker.flows import Flows
from jetcron_services.run_tracker.history import Pruner, StorageKeeper
from jetcron_services.run_tracker.hooks.flows import FlowSteps
from jetcron_services.run_tracker.hooks.retention import Retention
from jetcron_services.run_tracker.listing import serve_listing
from jetcron_services.run_tracker.ports import ReconcileAsLeaderPorts, StandbyRoundPorts, SweeperPorts
from jetcron_services.run_tracker.reconciler import Reconciler
from jetcron_services.run_tracker.records import Records, standard_hooks
from jetcron_services.runtime import Context, background

SWEEP_SECONDS = 0.25


async def reconcile_as_leader(ctx: ReconcileAsLeaderPorts, reconciler: Reconciler, janitor: CheckpointJanitor,
                              deadlines: Deadlines, keeper: StorageKeeper, flows: Flows,
                              losses: AgentLosses, finished: FinishedCounts) -> None:
    """Every replica keeps the index; only the lease holder sweeps (a second sweeper only wastes work). The lease
    is renewed beside the sweeps (HeldLease.lead): a sweep slowed by the storage, or one that fails, never lets it
    lapse; a replica that lost it contends again every round."""
    leader = HeldLease(ctx.leases, s.TRACKER_LEADER_KEY, f"tracker-{secrets.token_hex(4)}",
                       ctx.settings.leader_lease_ttl)
    await reconciler.synced.wait()
    while not ctx.stop.is_set():
        try:
            won = await leader.take()
        except Exception as exc:  # storage unavailable, or the client between connections: again
            ctx.log.warning("tracker lease error", error=str(exc))
            won = False
        metrics.child(metrics.LEASES_HELD, kind="tracker_leader").set(1 if won else 0)
        if not won:
            await _standby_round(ctx, losses, finished)
            continue
        metrics.child(metrics.TAKEOVERS, kind="tracker_leader").inc()
        ctx.log.info("tracker leader", replica=leader.holder)
        sweep = _sweeper(ctx, leader, reconciler, janitor, deadlines, keeper, flows, losses, finished)

        def failed(exc: Exception) -> None:
            ctx.log.error("tracker sweep failed; next round", error=repr(exc), exc_info=exc)

        await leader.lead(ctx.stop, sweep, every=SWEEP_SECONDS, failed=failed)
        metrics.child(metrics.LEASES_HELD, kind="tracker_leader").set(0)
        if not ctx.stop.is_set():
            ctx.log.warning("tracker leadership lost", why=leader.why_dropped)
            deadlines.lost_lead()
            keeper.forget()
            losses.lost_lead()
    await leader.release()


def _sweeper(ctx: SweeperPorts, leader: HeldLease, reconciler: Reconciler, janitor: CheckpointJanitor,
             deadlines: Deadlines, keeper: StorageKeeper, flows: Flows, losses: AgentLosses,
             finished: FinishedCounts) -> Callable[[], Awaitable[None]]:
    """One leader's round of sweeps, for the time it holds the lease just won."""
    won = time.monotonic()
    first = True

    async def sweep() -> None:
        nonlocal first
        now = ctx.clock.now()
        await reconciler.sweep(now)
        await janitor.maybe_sweep(now)
        await deadlines.maybe_sweep(now)
        await keeper.maybe_check(now)
        await flows.maybe_expire_waits(reconciler.active, now)
        # A sweep done is the leader's action: its lease carries the time, and the first since winning measures
        # the takeover gap from the previous holder's last one (jetcron.core.lifecycle.takeover).
        gap = leader.acted(ctx.clock.now())
        if gap is not None:
            metrics.child(metrics.TAKEOVER_GAP, kind="tracker_leader").observe(gap)
        if first:  # ready once the first sweep is done
            first = False
            metrics.child(metrics.TAKEOVER_DURATION, kind="tracker_leader").observe(time.monotonic() - won)
        with contextlib.suppress(JetcronError):
            await losses.maybe_check(True)
        await finished.maybe_flush(ctx.clock.now(), write=True)

    return sweep


async def _standby_round(ctx: StandbyRoundPorts, losses: AgentLosses, finished: FinishedCounts) -> None:
    """A replica that does not lead still follows the agents' heartbeats and the finished tallies (writing
    nothing), so that it can take over warm."""
    try:
        with contextlib.suppress(JetcronError):
            await losses.maybe_check(False)
        await finished.maybe_flush(ctx.clock.now(), write=False)
    except Exception as exc:  # a standby's round is retried; it must not end the loop
        ctx.log.warning("tracker standby round failed", error=repr(exc))
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(ctx.stop.wait(), timeout=SWEEP_SECONDS)


async def main(ctx: Context) -> None:
    flows = Flows(ctx)
    pruner = Pruner(ctx)

    records = Records(ctx, random.Random(), hooks=[*standard_hooks(ctx), Retention(pruner), FlowSteps(flows)])
    handler = EventHandler(records)
    reconciler = Reconciler(ctx, records)
    records.known = reconciler.known
    finished = FinishedCounts(ctx, await ctx.buckets.open(s.BUCKET_FINISHED, FinishedMinute))
    reconciler.ended = finished.noted
    reconciler.seen = flows.seen
    losses = AgentLosses(ctx)
    reconciler.progress.watched = losses.beats
    stop = asyncio.Event()
    tasks = [background(ctx, t) for t in (
        flows.watch_jobs(), reconciler.watch(), pruner.run(), losses.watch(), flows.repair(),
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
    for task in tasks[:5]:  # the watches, the pruner and the marks' repair end only when cancelled
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
